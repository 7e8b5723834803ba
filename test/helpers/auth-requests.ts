// Requests with credentials, for the identity tests: a bearer header, and a raw POST that shows what an SDK client
// would hide (status codes, WWW-Authenticate).
import type { Json } from './harness.js';

export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

/** A 2025-11-25 initialize, as a client without an SDK sends it. */
export const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

export interface RawAnswer {
  status: number;
  headers: Headers;
  /** The JSON body (an object, or a batch's array), undefined when the body is not JSON. */
  json: Json | undefined;
}

/** A raw POST of `body` as JSON to the MCP endpoint at `url`. */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<RawAnswer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: /^[[{]/.test(text) ? (JSON.parse(text) as Json) : undefined };
}
