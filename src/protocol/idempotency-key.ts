// The idempotency key a task-creating tools/call may carry, wherever the client could put it: the `Idempotency-Key`
// HTTP header (IETF httpapi draft: an RFC 8941 Item whose value is a String; the bare value Stripe-style clients
// send is read as the same key), the gateway's own `_meta` key (for
// callers behind stdio bridges, which cannot set headers), or the client-chosen task id of SEP-1686 as first
// proposed (`_meta["modelcontextprotocol.io/task"].taskId`). Read here, checked once; what a key does is the task
// core's (tasks/idempotency.ts).
import { GatewayError } from '../errors.js';
import { asObject, type JsonObject } from '../jsonrpc.js';

/** The header, as Node names it (lower case). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** The gateway's `_meta` key for it: a string, the key itself (no quoting). */
export const IDEMPOTENCY_KEY_META = 'taskgate/idempotency-key';

/** SEP-1686 (as first proposed) marked a task-augmented request with this `_meta` key: `{ taskId, keepAlive? }`. */
export const SEP1686_TASK_META = 'modelcontextprotocol.io/task';

/** The longest key accepted, in characters: a key is stored with its task and compared on every retry. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

const EXAMPLE = 'e.g. Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324" (or the key unquoted, without spaces, quotes, commas or semicolons)';

/** The header's value among a request's headers; several (which Node may hand over as a list) are one list, malformed. */
export function idempotencyHeaderOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers[IDEMPOTENCY_KEY_HEADER];
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * The key a tools/call carries, from the header's raw value and the call's `_meta`; undefined when it carries none.
 * Throws -32602 for a malformed or oversized key, and for two places that name different keys.
 */
export function idempotencyKeyOf(header: string | undefined, meta: JsonObject | undefined): string | undefined {
  const found: { where: string; key: string }[] = [];
  if (header !== undefined) found.push({ where: 'the Idempotency-Key header', key: parseIdempotencyKeyHeader(header) });
  const own = meta?.[IDEMPOTENCY_KEY_META];
  if (own !== undefined) found.push({ where: `_meta["${IDEMPOTENCY_KEY_META}"]`, key: checkedKey(own, `_meta["${IDEMPOTENCY_KEY_META}"]`) });
  const seed = meta?.[SEP1686_TASK_META];
  if (seed !== undefined) {
    const taskId = asObject(seed)?.taskId;
    found.push({ where: `_meta["${SEP1686_TASK_META}"].taskId`, key: checkedKey(taskId, `_meta["${SEP1686_TASK_META}"].taskId`) });
  }
  const [first, ...others] = found;
  const differing = others.find((other) => other.key !== first?.key);
  if (first !== undefined && differing !== undefined) {
    throw new GatewayError('invalid_params', `Invalid params: ${first.where} and ${differing.where} name different idempotency keys; send one key`);
  }
  return first?.key;
}

/** `params` without the `_meta` keys that are the gateway's to read: the upstream never sees them. */
export function withoutIdempotencyMeta(params: JsonObject): JsonObject {
  const meta = asObject(params._meta);
  if (meta === undefined || !(IDEMPOTENCY_KEY_META in meta || SEP1686_TASK_META in meta)) return params;
  const { [IDEMPOTENCY_KEY_META]: _own, [SEP1686_TASK_META]: _seed, ...rest } = meta;
  return { ...params, _meta: rest };
}

/**
 * The key an `Idempotency-Key` header value holds: an RFC 8941 Item whose bare item is a String (`"…"`, printable
 * ASCII, `\"` and `\\` escaped), parameters allowed and ignored (as RFC 8941 has recipients do with unknown ones).
 * Stripe-style clients send the key unquoted (`Idempotency-Key: 8e03978e-…`, which RFC 8941 would not even read
 * as a token, since it starts with a digit): such a bare key is the same key as its quoted form (`abc` is `"abc"`).
 * It runs up to the first space, quote, comma or semicolon, so several headers (joined with commas) stay malformed.
 */
export function parseIdempotencyKeyHeader(value: string): string {
  const reader = new ItemReader(value.replace(/^ +| +$/g, ''));
  const quoted = reader.quoted();
  const key = quoted ? reader.string() : reader.bareKey();
  reader.parameters();
  if (!reader.done()) malformed(`unexpected ${JSON.stringify(reader.rest())} after the ${quoted ? 'quoted ' : ''}key`);
  return checkedKey(key, 'the Idempotency-Key header');
}

/** A key that is a non-empty string of printable ASCII of at most MAX_IDEMPOTENCY_KEY_LENGTH characters. */
function checkedKey(value: unknown, where: string): string {
  if (typeof value !== 'string') throw new GatewayError('invalid_params', `Invalid params: ${where} must be a string`);
  if (value === '') throw new GatewayError('invalid_params', `Invalid params: ${where} must not be empty`);
  if (value.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new GatewayError('invalid_params', `Invalid params: ${where} is ${value.length} characters long; an idempotency key may have at most ${MAX_IDEMPOTENCY_KEY_LENGTH}`);
  }
  if (!/^[\x20-\x7e]+$/.test(value)) throw new GatewayError('invalid_params', `Invalid params: ${where} may hold only printable ASCII characters`);
  return value;
}

function malformed(why: string): never {
  throw new GatewayError('invalid_params', `Invalid params: malformed Idempotency-Key header (${why}); its value is a quoted string (RFC 8941), ${EXAMPLE}`);
}

/** Reads an RFC 8941 Item (section 4.2.3) left to right: what an Idempotency-Key header needs of it. */
class ItemReader {
  private at = 0;

  constructor(private readonly text: string) {}

  done(): boolean {
    return this.at >= this.text.length;
  }

  rest(): string {
    return this.text.slice(this.at);
  }

  /** Whether an sf-string starts here (else the key is bare). */
  quoted(): boolean {
    return this.text[this.at] === '"';
  }

  /** A key sent unquoted: everything up to a space, quote, comma or semicolon (checkedKey bounds what it holds). */
  bareKey(): string {
    const key = /^[^\s",;]*/.exec(this.rest())?.[0] ?? '';
    if (key === '') malformed(this.done() ? 'it is empty' : 'no key before the parameters');
    this.at += key.length;
    return key;
  }

  /** An sf-string (4.2.5). */
  string(): string {
    if (this.text[this.at] !== '"') malformed(this.done() ? 'it is empty' : 'the key is not in double quotes');
    this.at++;
    let out = '';
    while (this.at < this.text.length) {
      const char = this.text[this.at++] as string;
      if (char === '\\') {
        const next = this.text[this.at++];
        if (next !== '"' && next !== '\\') malformed('a backslash may only escape " or \\');
        out += next;
      } else if (char === '"') return out;
      else if (char < ' ' || char > '~') malformed('only printable ASCII may appear between the quotes');
      else out += char;
    }
    return malformed('the closing double quote is missing');
  }

  /** Parameters (4.2.3.2): `;key` or `;key=bare-item`, each read and dropped. */
  parameters(): void {
    while (this.text[this.at] === ';') {
      this.at++;
      while (this.text[this.at] === ' ') this.at++;
      const key = /^[a-z*][a-z0-9_\-.*]*/.exec(this.rest());
      if (key === null) malformed('a parameter name must start with a lower-case letter or *');
      this.at += key[0].length;
      if (this.text[this.at] === '=') {
        this.at++;
        this.bareItem();
      }
    }
  }

  /** Any bare item (4.2.3.1): integer or decimal, string, token, byte sequence, boolean. */
  private bareItem(): void {
    if (this.text[this.at] === '"') {
      this.string();
      return;
    }
    const item = /^(?:-?\d{1,15}(?:\.\d{1,3})?|[A-Za-z*][!#$%&'*+\-.^_`|~\w:/]*|:[A-Za-z0-9+/=]*:|\?[01])/.exec(this.rest());
    if (item === null) malformed('a parameter value is not an RFC 8941 bare item');
    this.at += item[0].length;
  }
}
