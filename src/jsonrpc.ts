// Minimal JSON-RPC 2.0 shapes. The gateway forwards messages as plain objects so that fields it does not know
// (future spec additions, vendor `_meta`) survive untouched; only the envelope is typed here.

export type RequestId = string | number;
export type JsonObject = Record<string, unknown>;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: RequestId;
  method: string;
  params?: JsonObject;
}

export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: JsonObject;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface JsonRpcSuccess {
  jsonrpc: '2.0';
  id: RequestId;
  result: JsonObject;
}

export interface JsonRpcFailure {
  jsonrpc: '2.0';
  id: RequestId | null;
  error: JsonRpcErrorObject;
}

export type JsonRpcResponse = JsonRpcSuccess | JsonRpcFailure;
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

/** What an upstream (or a local handler) answered: exactly one of result or error, without id. */
export type Outcome = { result: JsonObject } | { error: JsonRpcErrorObject };

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isId(value: unknown): value is RequestId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));
}

export function isRequest(message: JsonRpcMessage): message is JsonRpcRequest {
  return 'method' in message && 'id' in message;
}

export function isNotification(message: JsonRpcMessage): message is JsonRpcNotification {
  return 'method' in message && !('id' in message);
}

export function isResponse(message: JsonRpcMessage): message is JsonRpcResponse {
  return !('method' in message) && ('result' in message || 'error' in message);
}

/**
 * Checks one decoded JSON value for the JSON-RPC envelope. Returns the message, or an error text saying what
 * is wrong (for -32600 Invalid Request).
 */
export function validateMessage(value: unknown): JsonRpcMessage | string {
  if (!isObject(value)) return 'a JSON-RPC message must be an object';
  if (value.jsonrpc !== '2.0') return 'jsonrpc must be "2.0"';
  if ('method' in value) {
    if (typeof value.method !== 'string' || value.method === '') return 'method must be a non-empty string';
    if ('params' in value && value.params !== undefined && !isObject(value.params)) return 'params must be an object';
    if ('id' in value && !isId(value.id)) return 'id must be a string or a number';
    return value as unknown as JsonRpcMessage;
  }
  if ('result' in value || 'error' in value) {
    if ('result' in value && 'error' in value) return 'a response carries either result or error, not both';
    if (!isId(value.id)) return 'a response id must be a string or a number';
    if ('result' in value && !isObject(value.result)) return 'result must be an object';
    if ('error' in value) {
      const error = value.error;
      if (!isObject(error) || typeof error.code !== 'number' || typeof error.message !== 'string') {
        return 'error must be an object with a numeric code and a string message';
      }
    }
    return value as unknown as JsonRpcMessage;
  }
  return 'not a request, notification or response';
}

/**
 * The id of an invalid message that was meant as a response (no method, a usable id): its request must fail
 * rather than wait for an answer that was refused.
 */
export function responseIdOf(value: unknown): RequestId | undefined {
  return isObject(value) && !('method' in value) && isId(value.id) ? value.id : undefined;
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Walks the brackets of JSON text that lie outside strings: `visit(index, depth, opening)` gets the depth after
 * each one (an opening bracket deepens, a closing one returns) and may stop the walk by returning false. The text
 * need not be valid JSON; `inString` says whether it ended inside a string.
 */
function walkBrackets(text: string, visit: (index: number, depth: number, opening: boolean) => boolean): { inString: boolean } {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (!visit(i, ++depth, true)) break;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (!visit(i, --depth, false)) break;
    }
  }
  return { inString };
}

/**
 * Whether JSON text nests arrays and objects deeper than `maxDepth`, found by one scan of the text before it is
 * parsed: a deep value parses fine but overflows the stack of every recursive walk after it (JSON.stringify
 * included), so it must be refused at the door.
 */
export function jsonNestingExceeds(text: string, maxDepth: number): boolean {
  // Text with no more opening brackets than the bound (inside strings or not) cannot nest deeper. Counted by native
  // searches, this spares almost every message the walk below, a JavaScript loop over each of its characters.
  if (openingBracketsAtMost(text, maxDepth)) return false;
  let exceeds = false;
  walkBrackets(text, (_index, depth) => !(exceeds = depth > maxDepth));
  return exceeds;
}

/** Whether `text` holds at most `limit` of `{` and `[` together; stops counting past it. */
function openingBracketsAtMost(text: string, limit: number): boolean {
  let count = 0;
  for (const bracket of ['{', '[']) {
    for (let at = text.indexOf(bracket); at !== -1; at = text.indexOf(bracket, at + 1)) if (++count > limit) return false;
  }
  return true;
}

const BOM = '\uFEFF';

/**
 * The JSON values of a body a peer sent as `application/json`: normally one (a message or a batch). Real servers
 * also send several values one after another (a notification, then the response), or a byte-order mark first;
 * both mean one thing only, so they are accepted and `quirk` says what was forgiven. Anything else is an error.
 */
export function decodeJsonBody(text: string): { values: unknown[]; quirk?: string } | { error: string } {
  const bom = text.startsWith(BOM);
  const body = bom ? text.slice(1) : text;
  try {
    const value: unknown = JSON.parse(body);
    return bom ? { values: [value], quirk: 'a byte-order mark before the JSON' } : { values: [value] };
  } catch (error) {
    const values = splitJsonValues(body);
    if (values === undefined || values.length < 2) return { error: (error as Error).message };
    return { values, quirk: `${values.length} JSON values in one body` };
  }
}

/** Top-level objects and arrays written one after another (whitespace between), parsed; undefined if not that. */
function splitJsonValues(text: string): unknown[] | undefined {
  const spans: [number, number][] = [];
  let start = 0;
  let balanced = true;
  const { inString } = walkBrackets(text, (index, depth, opening) => {
    if (opening && depth === 1) start = index;
    else if (!opening && depth === 0) spans.push([start, index + 1]);
    return (balanced = depth >= 0);
  });
  if (!balanced || inString || spans.length === 0 || (spans.at(-1)?.[1] ?? 0) < text.trimEnd().length) return undefined;
  // Between the values (and before the first) there may be whitespace only: no scalars, strings or stray text.
  let end = 0;
  const values: unknown[] = [];
  for (const [from, to] of spans) {
    if (text.slice(end, from).trim() !== '') return undefined;
    try {
      values.push(JSON.parse(text.slice(from, to)));
    } catch {
      return undefined;
    }
    end = to;
  }
  return values;
}

/** A message the gateway built that JSON cannot encode: a fault of the gateway, not of where it was going. */
export class MessageEncodingError extends Error {
  constructor(cause: unknown) {
    super(`the message cannot be encoded as JSON: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'MessageEncodingError';
  }
}

/** JSON text of an outgoing message; throws MessageEncodingError (never a transport's error) when it has none. */
export function encodeMessage(message: unknown): string {
  try {
    return JSON.stringify(message);
  } catch (error) {
    throw new MessageEncodingError(error);
  }
}

export function toResponse(id: RequestId, outcome: Outcome): JsonRpcResponse {
  return 'result' in outcome
    ? { jsonrpc: '2.0', id, result: outcome.result }
    : { jsonrpc: '2.0', id, error: outcome.error };
}

export function errorResponse(id: RequestId | null, code: number, message: string, data?: unknown): JsonRpcFailure {
  return { jsonrpc: '2.0', id, error: data === undefined ? { code, message } : { code, message, data } };
}

export function asObject(value: unknown): JsonObject | undefined {
  return isObject(value) ? value : undefined;
}

/** Params without their `_meta` (what belongs to the hop, not to the request itself). */
export function withoutMeta(params: JsonObject): JsonObject {
  const { _meta: _ignored, ...rest } = params;
  return rest;
}

/** `value` without one key of its `_meta` (and without `_meta` when that was its only key). */
export function withoutMetaKey(value: JsonObject, key: string): JsonObject {
  const meta = asObject(value._meta);
  if (meta === undefined || !(key in meta)) return value;
  const { [key]: _dropped, ...rest } = meta;
  const copy = { ...value };
  if (Object.keys(rest).length === 0) delete copy._meta;
  else copy._meta = rest;
  return copy;
}

/**
 * JSON with object keys sorted (and undefined members left out): one text for one value whatever order its keys
 * came in, so that a digest of it tells two requests' params apart by what they say, not how they were written.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as JsonObject).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
