// How one upstream's connections reach it, chosen by its `transport` key: a stdio child, or the upstream's HTTP
// pool (transports/http-agent.ts), through a dispatcher per connection that gives each of its requests the
// connection's credential (or its caller's), the refresh after a 401 and its trace context (transports/outbound.ts).
import type { Agent } from 'undici';
import type { UpstreamConfig } from '../../config/types.js';
import type { CredentialSource } from '../../identity/credential-source.js';
import type { Logger } from '../../log.js';
import { createUpstreamAgent, upstreamDispatcher } from '../transports/http-agent.js';
import { HttpSseTransport } from '../transports/http-sse.js';
import { StdioTransport } from '../transports/stdio.js';
import { endUpstreamSession, StreamableHttpTransport } from '../transports/streamable-http.js';
import type { UpstreamTransport } from '../transports/transport.js';

export class UpstreamTransports {
  /** The connection pool of an HTTP upstream (Streamable HTTP, SSE), shared by all its connections; none for stdio. */
  readonly agent: Agent | undefined;

  constructor(
    private readonly config: UpstreamConfig,
    private readonly logger: Logger,
  ) {
    this.agent = config.transport === 'stdio' ? undefined : createUpstreamAgent(config);
  }

  /** A transport whose requests authenticate with `credentials` (stdio: none; `env`: a per-principal child's). */
  create(credentials: CredentialSource, env?: () => Promise<Record<string, string>>): UpstreamTransport {
    const config = this.config;
    if (config.transport === 'stdio') return new StdioTransport(config, this.logger, env);
    const options = { url: config.url, dispatcher: upstreamDispatcher(this.agent as Agent, credentials), logger: this.logger, maxMessageBytes: config.maxMessageBytes };
    if (config.transport === 'sse') return new HttpSseTransport(options);
    return new StreamableHttpTransport(options);
  }

  /**
   * Ends an upstream session another replica opened and left open, as `credentials` (see Upstream.endOrphanSession).
   * Resolves whether the upstream answered; only Streamable HTTP upstreams have sessions to end.
   */
  endOrphanSession(sessionId: string, protocolVersion: string | undefined, credentials: CredentialSource): Promise<boolean> {
    if (this.config.transport !== 'streamable-http' || this.agent === undefined) return Promise.resolve(false);
    return endUpstreamSession({ dispatcher: upstreamDispatcher(this.agent, credentials), url: this.config.url }, sessionId, protocolVersion);
  }

  /** Closes the pool (its connections were closed first). */
  async close(): Promise<void> {
    await this.agent?.close().catch(() => undefined);
  }
}
