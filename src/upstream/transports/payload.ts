// One decoder for all JSON text an upstream sends, whatever revision or transport it speaks: an HTTP body, one
// SSE event's data, one stdio line. Real servers bend the framing in ways that can mean one thing only (several
// JSON values in one body, a byte-order mark, a missing Content-Type); those are accepted here, in one place, and
// warned about, so that no transport forgives less than another.
import { decodeJsonBody } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import { readBodyStart, readBoundedText, type BodyStream } from './body-reader.js';
import { warnViolation } from './violations.js';

/** How many characters of an unanswering body an error quotes. */
const QUOTED_CHARS = 120;

/**
 * The JSON-RPC items in `text`, in order, batches flattened (still to be validated). A forgiven quirk is warned
 * about; text that is not JSON is warned about as `notJson` and yields nothing.
 */
export function decodePayload(text: string, logger: Logger, notJson = 'data that is not JSON'): unknown[] {
  if (text.trim() === '') return [];
  const decoded = decodeJsonBody(text);
  if ('error' in decoded) {
    warnViolation(logger, notJson, { reason: decoded.error, data: text.slice(0, 200) });
    return [];
  }
  if (decoded.quirk !== undefined) warnViolation(logger, decoded.quirk);
  return decoded.values.flatMap((value) => (Array.isArray(value) ? (value as unknown[]) : [value]));
}

/** What an upstream's HTTP body held: its JSON-RPC items and, for an error that says what came, its start. */
export interface HttpPayload {
  items: unknown[];
  /** The body's first characters (at most QUOTED_CHARS of them are quoted). */
  start: string;
}

/**
 * An HTTP response body that is not an SSE stream, read with the upstream's bound and decoded. JSON is taken
 * when declared, or when the Content-Type is missing and the body looks like JSON (there is nothing else it could
 * mean; warned about). Any other type is not JSON-RPC: only its start is read, to say what came. Throws
 * MessageTooLargeError past `maxBytes`, as readBoundedText does.
 */
export async function readHttpPayload(body: BodyStream, contentType: string, contentLength: string | string[] | undefined, maxBytes: number, logger: Logger): Promise<HttpPayload> {
  const declared = /^application\/([\w.+-]*\+)?json\b/i.test(contentType.trim());
  if (!declared && contentType.trim() !== '') return { items: [], start: await readBodyStart(body, QUOTED_CHARS * 4) };
  const text = await readBoundedText(body, maxBytes, contentLength);
  const start = text.slice(0, QUOTED_CHARS + 1);
  if (declared) return { items: decodePayload(text, logger), start };
  if (!/^\uFEFF?\s*[[{]/.test(text)) return { items: [], start };
  warnViolation(logger, 'a response without Content-Type');
  return { items: decodePayload(text, logger), start };
}

/**
 * What an HTTP response that held no JSON-RPC answer did hold, for the error its call fails with: the status, the
 * content type and the body's first characters (quoted as JSON, so that control characters show).
 */
export function describeUnanswered(status: number, contentType: string, start: string): string {
  const type = contentType.trim() === '' ? 'no Content-Type' : `Content-Type '${contentType}'`;
  const quoted = start.length > QUOTED_CHARS ? `${JSON.stringify(start.slice(0, QUOTED_CHARS))}…` : JSON.stringify(start);
  return `HTTP ${status}, ${type}, ${start === '' ? 'empty body' : `body began ${quoted}`}`;
}
