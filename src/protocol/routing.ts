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

/** The upstream that serves an exposed tool or prompt name, and its name there. */
export async function routeNamed(catalog: GatewayCatalog, access: CallerAccess, kind: NamedKind, name: string): Promise<{ upstream: Upstream; name: string }> {
  const route = await catalog.resolve(kind, name, { actingFor: access.actingFor });
  if (route === undefined || !access.allows(kind, name)) throw new GatewayError('invalid_params', `Unknown ${kind === 'tools' ? 'tool' : 'prompt'}: ${name}`);
  return route;
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
