// Which upstream serves a request for a tool, a prompt or a resource, with the caller's access checked, as every
// revision routes it. What the caller may not use is answered exactly like what does not exist, with one text per
// kind ("Unknown tool: x", "Resource not found: uri"). Only the code of a missing resource is the revision's:
// 2025-11-25 has a resource-not-found code of its own, 2026-07-28 answers invalid params. Only what an upstream
// listed, byte for byte, is routed (the catalog reads its lists again once on a miss): a near miss of an excluded
// or hidden name is unknown here, never forwarded to an upstream that might look it up leniently.
import { GatewayError, type ErrorCode } from '../errors.js';
import type { Upstream } from '../upstream/life/upstream.js';
import type { CallerAccess } from './access.js';
import type { NamedKind } from '../mcp.js';
import type { GatewayCatalog } from './ports.js';

/** Where an exposed name goes: its upstream and its name there. */
export interface NamedRoute {
  upstream: Upstream;
  name: string;
  /**
   * No upstream lists the name, but it carries the prefix of an upstream that acts as each user (issue 41): the call
   * plan's consent step answers a caller who has not connected it; anyone else gets this error, as for any name
   * that does not resolve (never forwarded: only what was listed is).
   */
  unlisted?: GatewayError;
}

/**
 * The upstream that serves an exposed tool or prompt name, and its name there. `consent`: a tool call, for which an
 * unlisted name under the prefix of an upstream that acts as each user is routed `unlisted` (see NamedRoute).
 */
export async function routeNamed(catalog: GatewayCatalog, access: CallerAccess, kind: NamedKind, name: string, options: { consent?: boolean } = {}): Promise<NamedRoute> {
  // Made only when the name does not resolve: an Error's stack capture costs a resolved call more than its routing.
  const unknown = (): GatewayError => new GatewayError('invalid_params', `Unknown ${kind === 'tools' ? 'tool' : 'prompt'}: ${name}`);
  const unlisted = (error: GatewayError): NamedRoute | undefined => {
    const owner = options.consent === true && access.allows(kind, name) ? catalog.consentOwner(kind, name) : undefined;
    return owner === undefined ? undefined : { ...owner, unlisted: error };
  };
  let route: { upstream: Upstream; name: string } | undefined;
  try {
    route = await catalog.resolve(kind, name, { actingFor: access.actingFor });
  } catch (error) {
    // Its upstream waits for a first connection (down): the consent request, for a caller who can give it.
    const consentRoute = error instanceof GatewayError ? unlisted(error) : undefined;
    if (consentRoute !== undefined) return consentRoute;
    throw error;
  }
  if (route === undefined) {
    const error = unknown();
    return unlisted(error) ?? Promise.reject(error);
  }
  // Asked once: a refusal is audited where it is asked (a denied name gets no consent request either).
  if (!access.allows(kind, name)) throw unknown();
  return route;
}

/**
 * A connected caller's tool call to a name that was `unlisted` (see NamedRoute: its upstream waited for a first
 * connection): the upstream is tried again now rather than after its backoff, and the name must then be listed like
 * any other, or the call gets the error it had (never forwarded on its prefix alone).
 */
export async function listedOnceConnected(catalog: GatewayCatalog, access: CallerAccess, name: string, unlisted: { upstream: Upstream; error: GatewayError }): Promise<void> {
  await unlisted.upstream.retryNow();
  const route = await routeNamed(catalog, access, 'tools', name).catch(() => undefined);
  if (route?.upstream !== unlisted.upstream) throw unlisted.error;
}

/** The upstream that serves a resource URI (`params.uri`, checked); `missing`: the revision's code for none. */
export async function resourceOwner(
  catalog: GatewayCatalog,
  access: CallerAccess,
  uri: unknown,
  missing: Extract<ErrorCode, 'resource_not_found' | 'invalid_params'>,
): Promise<{ upstream: Upstream; uri: string }> {
  if (typeof uri !== 'string') throw new GatewayError('invalid_params', 'params.uri must be a string');
  const upstream = await catalog.resolveUri(uri);
  if (upstream === undefined || !access.allows('resources', uri)) throw new GatewayError(missing, `Resource not found: ${uri}`, { uri });
  return { upstream, uri };
}
