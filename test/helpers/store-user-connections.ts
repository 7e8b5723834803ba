// A small UserConnections over the real store, for testing the browser side of per-user consent (src/http/consent/)
// before and apart from the consent core: links, flows and connections go through store.connections exactly as
// the contract says (a link used up only by its own principal, a flow single use and bound to the browser's cookie),
// but there is no authorization server behind it: `authorizeUrl` points at `authorizeEndpoint` (never followed by
// these tests) and the callback stores a connection whose tokens are a sealed placeholder.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ConsentRefused, LINK_TTL_MS, connectionStatus, type CallbackParams, type ConnectionStatus, type ConsentPage, type ConsentRequest, type UserConnections } from '../../src/consent/ports.js';
import type { Sealer } from '../../src/identity/sealing.js';
import type { Connections } from '../../src/store/connections.js';

export interface StoreUserConnectionsOptions {
  connections: Connections;
  sealer: Sealer;
  /** The public origin links and the redirect URI are built on. */
  origin: string;
  /** Per upstream: the authorization server's issuer and authorization endpoint, and the scopes asked. */
  upstreams: Record<string, { issuer: string; authorizeEndpoint: string; scopes: string[] }>;
}

const sha256 = (value: string): string => createHash('sha256').update(value).digest('base64url');

export class StoreUserConnections implements UserConnections {
  /** What begin() was asked, in order (principal and link), refused or not. */
  readonly begun: { id: string; principal: string; refused?: string }[] = [];

  constructor(private readonly options: StoreUserConnectionsOptions) {}

  requires(upstream: string): boolean {
    return upstream in this.options.upstreams;
  }

  upstreams(): string[] {
    return Object.keys(this.options.upstreams);
  }

  async isConnected(principal: string, upstream: string): Promise<boolean> {
    return (await this.options.connections.get(principal, upstream)) !== undefined;
  }

  async request(principal: string, upstream: string): Promise<ConsentRequest> {
    const id = randomBytes(24).toString('base64url');
    const elicitationId = randomBytes(8).toString('hex');
    const now = Date.now();
    await this.options.connections.putLink({ id, principal, upstream, elicitationId, createdAtMs: now, expiresAtMs: now + LINK_TTL_MS });
    return { upstream, elicitationId, url: `${this.options.origin}/connect/${id}`, message: `Connect ${upstream}` };
  }

  async link(id: string): Promise<{ principal: string; upstream: string } | undefined> {
    const link = await this.options.connections.getLink(id);
    return link === undefined ? undefined : { principal: link.principal, upstream: link.upstream };
  }

  async begin(id: string, browserPrincipal: string): Promise<ConsentPage> {
    const link = await this.options.connections.getLink(id);
    if (link === undefined) return this.refuse(id, browserPrincipal, 'link_unknown');
    if (link.principal !== browserPrincipal) return this.refuse(id, browserPrincipal, 'wrong_user');
    if ((await this.options.connections.takeLink(id)) === undefined) return this.refuse(id, browserPrincipal, 'link_unknown');
    this.begun.push({ id, principal: browserPrincipal });
    const server = this.options.upstreams[link.upstream]!;
    const state = randomBytes(24).toString('base64url');
    const cookie = randomBytes(32).toString('base64url');
    const redirectUri = `${this.options.origin}/oauth/callback`;
    await this.options.connections.putFlow({
      state,
      kind: 'consent',
      browserBinding: sha256(cookie),
      sealedVerifier: this.options.sealer.seal('verifier', `flow:${state}`),
      redirectUri,
      issuer: server.issuer,
      principal: link.principal,
      upstream: link.upstream,
      elicitationId: link.elicitationId,
      linkId: id,
      expiresAtMs: Date.now() + LINK_TTL_MS,
    });
    const url = new URL(server.authorizeEndpoint);
    url.search = new URLSearchParams({ response_type: 'code', client_id: 'gw', redirect_uri: redirectUri, state, scope: server.scopes.join(' ') }).toString();
    return { upstream: link.upstream, issuer: server.issuer, serverHost: new URL(server.issuer).host, scopes: server.scopes, authorizeUrl: url.href, browserCookie: cookie };
  }

  async complete(params: CallbackParams): Promise<{ principal: string; upstream: string }> {
    const flow = params.state === undefined ? undefined : await this.options.connections.takeFlow(params.state);
    if (flow === undefined || flow.kind !== 'consent') throw new ConsentRefused('state_unknown', 'unknown state');
    const presented = Buffer.from(sha256(params.cookie ?? ''));
    if (params.cookie === undefined || !timingSafeEqual(presented, Buffer.from(flow.browserBinding))) throw new ConsentRefused('state_mismatch', 'another browser');
    if (params.iss !== undefined && params.iss !== flow.issuer) throw new ConsentRefused('issuer_mismatch', 'another issuer');
    if (params.error !== undefined) throw new ConsentRefused('denied', 'denied');
    if (params.code === undefined) throw new ConsentRefused('exchange_failed', 'no code');
    const principal = flow.principal!;
    const upstream = flow.upstream!;
    const now = Date.now();
    const sealed = this.options.sealer.seal(JSON.stringify({ access: `at-${params.code}` }), `${principal}|${upstream}|${flow.issuer}`);
    const scopes = this.options.upstreams[upstream]!.scopes;
    await this.options.connections.put({ principal, upstream, issuer: flow.issuer, sealed, scopes, issuedAtMs: now, connectedAtMs: now, expiresAtMs: now + 3_600_000, version: 1 }, 0);
    return { principal, upstream };
  }

  async list(principal: string, upstreams: readonly string[]): Promise<ConnectionStatus[]> {
    return Promise.all(
      upstreams.map(async (upstream) => {
        const connection = await this.options.connections.get(principal, upstream);
        if (connection !== undefined) return connectionStatus(connection);
        const { url } = await this.request(principal, upstream);
        return { upstream, connected: false, scopes: this.options.upstreams[upstream]!.scopes, connectUrl: url };
      }),
    );
  }

  async disconnect(principal: string, upstream: string): Promise<boolean> {
    return (await this.options.connections.delete(principal, upstream)) !== undefined;
  }

  async accessToken(): Promise<string> {
    throw new Error('not used by the HTTP tests');
  }

  refused(): boolean {
    return false;
  }

  async anyConnected(upstream: string): Promise<string | undefined> {
    return this.options.connections.anyConnected(upstream);
  }

  async whenConnected(principal: string, upstream: string): Promise<boolean> {
    return this.isConnected(principal, upstream);
  }

  onConnected(): () => void {
    return () => undefined;
  }

  private refuse(id: string, principal: string, reason: 'link_unknown' | 'wrong_user'): never {
    this.begun.push({ id, principal, refused: reason });
    throw new ConsentRefused(reason, reason);
  }
}
