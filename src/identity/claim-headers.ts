// Header values from a caller's verified claims (`auth.claimHeaders`, issue 33), for upstreams on a trusted network.
// A claim is data from a token, so it is made safe for a header line: control characters (CR/LF above all) removed,
// non-ASCII percent-encoded as UTF-8 (encodeURIComponent's encoding, applied to non-ASCII bytes only, so ASCII text
// reads as it was; `%` itself is encoded too, so the value decodes unambiguously), capped in length.

/** The longest value sent, in bytes; a longer one is cut (never mid-escape). */
export const MAX_CLAIM_HEADER_BYTES = 1024;

/** The header value that names the caller's qualified principal rather than a claim. */
export const PRINCIPAL = 'principal';

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/g;
const NEEDS_ENCODING = /[^\u0020-\u007e]|%/gu;

/** A claim's value as header text, or undefined when it has none that can be sent (absent, null, an object). */
export function claimText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) {
    const items = value.map(claimText).filter((v): v is string => v !== undefined);
    return items.length > 0 ? items.join(',') : undefined;
  }
  return undefined;
}

/** Safe header text: no control characters, non-ASCII and `%` percent-encoded, at most `max` bytes. */
export function headerSafe(text: string, max = MAX_CLAIM_HEADER_BYTES): string {
  const encoded = text.replace(CONTROL, '').replace(NEEDS_ENCODING, percentEncoded).trim();
  if (encoded.length <= max) return encoded;
  const cut = encoded.slice(0, max);
  // Never leave half of a %XX escape at the end.
  return cut.replace(/%[0-9A-F]?$/, '');
}

/** One character as UTF-8 escapes; a lone surrogate (no character at all) is dropped. */
function percentEncoded(c: string): string {
  try {
    return encodeURIComponent(c);
  } catch {
    return '';
  }
}

/**
 * The headers `mapping` (header → claim name or "principal") gives for this caller; a claim the caller does not
 * have (or that is empty once made safe) sends no header.
 */
export function claimHeaders(
  mapping: Readonly<Record<string, string>>,
  caller: { principal: string; claims: Readonly<Record<string, unknown>> },
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [header, claim] of Object.entries(mapping)) {
    const text = claim === PRINCIPAL ? caller.principal : claimText(caller.claims[claim]);
    if (text === undefined) continue;
    const value = headerSafe(text);
    if (value !== '') headers[header] = value;
  }
  return headers;
}
