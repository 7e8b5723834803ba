// Where a browser may be sent after signing in: only a path of the gateway itself. Anything that a browser would
// resolve to another origin (`//evil`, `/\evil`, `https://…`, a scheme, control characters a browser strips) is
// refused, so the sign-in can never be made an open redirect.

/** Longest returnTo accepted: a connect link or a dashboard path, never a document. */
const MAX_RETURN_TO = 2048;

/** `value` when it is a same-origin relative path (`/…`, not `//` or `/\`), else undefined. */
export function safeReturnTo(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_RETURN_TO) return undefined;
  if (!value.startsWith('/') || value.startsWith('//') || value.startsWith('/\\')) return undefined;
  // Browsers drop tabs and newlines inside URLs and read a backslash as a slash: `/\t/evil` is `//evil` to them.
  if ([...value].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f || c === '\\')) return undefined;
  // The last word: resolved against a placeholder origin, it stays there.
  const base = 'https://gateway.invalid';
  try {
    return new URL(value, base).origin === base ? value : undefined;
  } catch {
    return undefined;
  }
}
