// Who owns a task, a session, a rate window: an opaque principal string, named here and nowhere else. With
// authentication a principal is the caller's full identity, qualified by the kind of credential, so that an API key
// and an OAuth subject of the same name (or a name shaped like one of the strings below) can never meet:
// `key:<name>` for an API key, `oauth:<issuer>#<subject>` for an access token (an issuer has no fragment, so the
// first `#` ends it). Without authentication a 2025-11-25 task belongs to the session that created it, every
// 2026-07-28 client is one anonymous principal (task ids are the bearer, as docs/limits.md says), and the gateway owns
// its own records.

/** Who a principal is, as far as rules name it: the credential it was proven by and the name that carries. */
export interface PrincipalName {
  credential: 'key' | 'oauth';
  name: string;
}

const SESSION_PRINCIPAL = 'session:';
const KEY_PRINCIPAL = 'key:';
const OAUTH_PRINCIPAL = 'oauth:';

/** Who an authenticated request comes from (http/credentials.ts): tasks and sessions are bound to the principal. */
export interface Caller extends PrincipalName {
  /** The qualified principal: what tasks, sessions, limits and logs know the caller by. */
  principal: string;
  /** The token's scopes (an API key's configured ones), for access rules that name scopes. */
  scopes: readonly string[];
  /** The verified access token's claims (an API key has none): what an upstream's `auth` may tell it of the caller. */
  claims: Readonly<Record<string, unknown>>;
  /**
   * The caller's own verified access token, read only to exchange it for an upstream's (RFC 8693). A function, so
   * that logging or serialising a caller never writes the token out.
   */
  subjectToken?: () => string | undefined;
}

/** The caller an API key names (`auth.apiKeys[].principal`). */
export function apiKeyCaller(name: string, scopes: readonly string[]): Caller {
  return { principal: `${KEY_PRINCIPAL}${name}`, credential: 'key', name, scopes, claims: {} };
}

/** The caller a verified access token names: its subject, at its issuer (`token`: the token itself, for exchange). */
export function oauthCaller(issuer: string, subject: string, scopes: readonly string[], claims: Readonly<Record<string, unknown>> = {}, token?: string): Caller {
  const caller: Caller = { principal: `${OAUTH_PRINCIPAL}${issuer}#${subject}`, credential: 'oauth', name: subject, scopes, claims };
  if (token !== undefined) caller.subjectToken = () => token;
  return caller;
}

/** The credential and name an authenticated principal stands for (what rules match); undefined for the gateway's own principals. */
export function nameOf(principal: string): PrincipalName | undefined {
  if (principal.startsWith(KEY_PRINCIPAL)) return { credential: 'key', name: principal.slice(KEY_PRINCIPAL.length) };
  if (!principal.startsWith(OAUTH_PRINCIPAL)) return undefined;
  const hash = principal.indexOf('#', OAUTH_PRINCIPAL.length);
  return hash < 0 ? undefined : { credential: 'oauth', name: principal.slice(hash + 1) };
}

/** The principal of the tasks a session creates. */
export function sessionPrincipal(sessionId: string): string {
  return `${SESSION_PRINCIPAL}${sessionId}`;
}

/** The session a principal names, if it names one. */
export function sessionOfPrincipal(principal: string): string | undefined {
  return principal.startsWith(SESSION_PRINCIPAL) ? principal.slice(SESSION_PRINCIPAL.length) : undefined;
}

/**
 * Whom every client is counted against without authentication: sessions (sessions.maxPerPrincipal) and
 * unfinished tasks of both eras (maxTasksPerPrincipal), so that opening new sessions does not open new room.
 */
export const ANONYMOUS_PRINCIPAL = 'anonymous';

/**
 * Whom a task is counted against for maxTasksPerPrincipal: its principal when the gateway authenticates; without
 * authentication every client together (its tasks are still its session's, or every 2026-07-28 client's, for
 * listing and access).
 */
export function countedPrincipal(principal: string, authenticated: boolean): string {
  return authenticated ? principal : ANONYMOUS_PRINCIPAL;
}

/** Every 2026-07-28 client, without authentication. */
export const STATELESS_PRINCIPAL = 'modern:anonymous';

/** Owner of the records that route a 2026-07-28 upstream's own tasks (never listed: no client is this principal). */
export const NATIVE_TASKS_PRINCIPAL = 'gateway:native-tasks';

/**
 * Who reads a task, as the task core checks it at every read: the principal it must belong to (undefined without
 * authentication, where the id is the bearer), and whether the caller may still use the task's tool under
 * `auth.access` (rules can change after the task was made; a revoked tool's results are not served).
 */
export interface TaskReader {
  principal: string | undefined;
  mayUse(tool: string): boolean;
}
