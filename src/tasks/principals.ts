// Who owns a task (listing, limits): an opaque principal string, named here and nowhere else. Until
// authentication exists, a 2025-11-25 task belongs to the session that created it, every 2026-07-28 client is one
// anonymous principal (task ids are the bearer, as the README says), and the gateway owns its own records.
const SESSION_PRINCIPAL = 'session:';

/** Who an authenticated request comes from (http/credentials.ts): tasks and sessions are bound to the principal. */
export interface Caller {
  principal: string;
  /** The token's scopes (an API key's configured ones), for access rules that name scopes. */
  scopes: readonly string[];
}

/** The principal of the tasks a legacy session creates. */
export function sessionPrincipal(sessionId: string): string {
  return `${SESSION_PRINCIPAL}${sessionId}`;
}

/** The session a principal names, if it names one. */
export function sessionOfPrincipal(principal: string): string | undefined {
  return principal.startsWith(SESSION_PRINCIPAL) ? principal.slice(SESSION_PRINCIPAL.length) : undefined;
}

/**
 * Whom every client is counted against without authentication: legacy sessions (sessions.maxPerPrincipal) and
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

/** Every 2026-07-28 client, until authentication exists. */
export const MODERN_PRINCIPAL = 'modern:anonymous';

/** Owner of the records that route a 2026-07-28 upstream's own tasks (never listed: no client is this principal). */
export const NATIVE_TASKS_PRINCIPAL = 'gateway:native-tasks';
