// Finding an upstream's authorization server as an MCP client does, shared by the gateway's own OAuth client
// (oauth-client.ts, issue 33) and per-user consent (src/consent/, issue 41): the upstream's 401 `WWW-Authenticate:
// Bearer resource_metadata=…` or its RFC 9728 well-known document, then the server's RFC 8414 metadata (OpenID
// Connect discovery as a fallback), each request under the caller's signal, and a cache of what was found. Whether a
// server found this way may be sent anything is the caller's decision: these functions only fetch documents.
import * as oauth from 'oauth4webapi';

/** How long something found by discovery is trusted before it is looked up again. */
export const DISCOVERY_TTL_MS = 3_600_000;

/** What a request through oauth4webapi is given: the deadline, and plain http where the caller allows it. */
export interface DiscoveryRequestOptions {
  signal: AbortSignal;
  [oauth.allowInsecureRequests]?: boolean;
}

/** Results of discovery per key, looked up once at a time (concurrent askers share one lookup). */
export class DiscoveryCache<T extends object = { tokenEndpoint: string; issuer: string }> {
  private readonly found = new Map<string, T & { until: number }>();
  private readonly running = new Map<string, Promise<T & { until: number }>>();

  constructor(private readonly now: () => number = Date.now) {}

  lookup(key: string, discover: () => Promise<T>): Promise<T & { until: number }> {
    const hit = this.found.get(key);
    if (hit !== undefined && this.now() < hit.until) return Promise.resolve(hit);
    let running = this.running.get(key);
    if (running === undefined) {
      running = discover()
        .then((d) => {
          const entry = { ...d, until: this.now() + DISCOVERY_TTL_MS };
          this.found.set(key, entry);
          return entry;
        })
        .finally(() => this.running.delete(key));
      this.running.set(key, running);
    }
    return running;
  }

  /** What is cached for `key` now, without looking anything up. */
  peek(key: string): T | undefined {
    const hit = this.found.get(key);
    return hit !== undefined && this.now() < hit.until ? hit : undefined;
  }

  /** Forget what was found (the endpoint moved: a token request to it failed with 404). */
  forget(key: string): void {
    this.found.delete(key);
  }
}

/** The `resource_metadata` parameter of a Bearer challenge (RFC 9728 §5.1), if any. */
export function resourceMetadataOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /(?:^|[\s,])resource_metadata\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/i.exec(header);
  const value = match?.[1]?.replace(/\\(.)/g, '$1') ?? match?.[2];
  return value !== undefined && URL.canParse(value) ? value : undefined;
}

/** An unauthenticated request to an upstream, for the 401 challenge that says where its metadata is. */
export async function probeChallenge(upstreamUrl: string, signal: AbortSignal): Promise<string | undefined> {
  const response = await fetch(upstreamUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'ping' }),
    signal,
    redirect: 'manual',
  });
  await response.body?.cancel();
  return response.status === 401 ? (response.headers.get('www-authenticate') ?? undefined) : undefined;
}

export interface ResourceMetadataLookup {
  /** The resource the metadata must name (RFC 9728 §3.3). */
  resource: URL;
  /** The upstream to probe for its challenge when `challenge` does not point at the metadata. */
  upstreamUrl: string;
  /** A `WWW-Authenticate` the upstream already sent (a 401 on a call), which saves the probe. */
  challenge?: string | undefined;
  signal: AbortSignal;
  /** The options of a request to `url` (plain http allowed or not). */
  requestOptions: (url: string) => DiscoveryRequestOptions;
  /** A URL the upstream pointed at, returned when the caller will fetch it (else it throws). */
  checked: (url: string) => string;
}

/**
 * The upstream's RFC 9728 metadata: where its challenge points, else the well-known URL for the resource's path,
 * then (as MCP clients do) the origin's.
 */
export async function resourceMetadata(lookup: ResourceMetadataLookup): Promise<oauth.ResourceServer> {
  const { resource, signal } = lookup;
  const pointer = resourceMetadataOf(lookup.challenge) ?? resourceMetadataOf(await probeChallenge(lookup.upstreamUrl, signal));
  if (pointer !== undefined) return oauth.processResourceDiscoveryResponse(resource, await getJson(lookup.checked(pointer), signal));
  const pathInserted = await oauth.resourceDiscoveryRequest(resource, lookup.requestOptions(resource.href));
  const response = pathInserted.ok || resource.pathname === '/' ? pathInserted : await getJson(`${resource.origin}/.well-known/oauth-protected-resource`, signal);
  return oauth.processResourceDiscoveryResponse(resource, response);
}

/** An authorization server's metadata: RFC 8414 first, OpenID Connect discovery when it has no RFC 8414 document. */
export async function serverMetadata(issuer: URL, options: DiscoveryRequestOptions): Promise<oauth.AuthorizationServer> {
  let first: unknown;
  for (const algorithm of ['oauth2', 'oidc'] as const) {
    try {
      const response = await oauth.discoveryRequest(issuer, { ...options, algorithm });
      return await oauth.processDiscoveryResponse(issuer, response);
    } catch (err) {
      first ??= err;
      if (options.signal.aborted) break;
    }
  }
  throw first;
}

async function getJson(url: string, signal: AbortSignal): Promise<Response> {
  return fetch(url, { headers: { accept: 'application/json' }, signal, redirect: 'manual' });
}

/** An issuer as RFC 8414 compares it, after URL parsing (as oauth4webapi checks the metadata's `issuer`). */
export function issuerIdentifier(issuer: string): string {
  return new URL(issuer).href;
}

/** 127.0.0.0/8, ::1 and localhost: plain http to them never leaves the machine. */
export function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || hostname === '::1' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

export function isAbort(err: unknown): boolean {
  const name = (err as { name?: unknown } | undefined)?.name;
  return name === 'AbortError' || name === 'TimeoutError';
}
