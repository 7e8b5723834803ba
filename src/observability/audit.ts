// The audit log, as a subscriber of the event seam: one structured line per fact an operator may have to account
// for later (who created, read, cancelled a task; what was refused; what a lost replica left behind). Each line
// carries an `audit` field naming the fact; the names, fields and messages are the ones the gateway always wrote,
// so log pipelines that filter on them keep working.
import type { ConnectionFacts, GatewayEventMap, GatewayEvents } from '../events.js';

/** Where audit lines go (the gateway's pino logger fits). */
export interface AuditLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** Every `audit` value the log may carry (docs/operations.md lists them). */
export const AUDIT_NAMES = [
  'task.created',
  'task.completed',
  'task.failed',
  'task.cancelled',
  'task.retrieved',
  'task.deleted',
  'task.requeued',
  'task.retried',
  'task.lost',
  'task.handed_over',
  'access.denied',
  'rate.limited',
  'credential.obtained',
  'credential.failed',
  'webhook.dead_lettered',
  'consent.requested',
  'consent.started',
  'consent.refused',
  'connection.created',
  'connection.refreshed',
  'connection.revoked',
  'connection.failed',
] as const;

/** Subscribes the audit log to `events`; returns what unsubscribes it. */
export function subscribeAuditLog(events: GatewayEvents, log: AuditLogger): () => void {
  const stops = [
    events.on('task.created', (e) => {
      if (e.native === true) {
        log.info({ audit: 'task.created', task: e.taskId, principal: e.principal, tool: e.tool, upstream: e.upstream, era: e.era, native: true }, 'task created: it runs on its upstream');
      } else {
        log.info({ audit: 'task.created', task: e.taskId, principal: e.principal, tool: e.tool, upstream: e.upstream, era: e.era }, 'task created');
      }
    }),
    events.on('task.ended', (e) => taskEnded(log, e)),
    events.on('task.retrieved', (e) => {
      // The task tools say how the result was read; tasks/result never did.
      const via = e.via === 'task tool' ? { via: e.via } : {};
      log.info({ audit: 'task.retrieved', task: e.taskId, principal: e.principal, ...via }, 'task result retrieved');
    }),
    events.on('task.deleted', (e) => {
      log.info({ audit: 'task.deleted', task: e.taskId, principal: e.principal }, 'task deleted');
    }),
    events.on('approval.requested', (e) => {
      log.info({ audit: 'approval.requested', task: e.taskId, principal: e.principal, tool: e.tool, approvers: e.approvers, deadline: new Date(e.deadline).toISOString() }, 'call held for approval');
    }),
    events.on('approval.decided', (e) => {
      const by = e.decidedBy === undefined ? {} : { by: e.decidedBy };
      const comment = e.comment === undefined ? {} : { comment: e.comment };
      log.info({ audit: 'approval.decided', task: e.taskId, principal: e.principal, tool: e.tool, decision: e.decision, ...by, ...comment, waitedMs: e.waitedMs }, `approval ${e.decision}`);
    }),
    events.on('task.recovered', (e) => {
      const base = { task: e.taskId, principal: e.principal, owner: e.previousOwner };
      if (e.action === 'lost') log.warn({ audit: 'task.lost', ...base }, 'task failed: its replica stopped');
      else if (e.action === 'requeued') log.warn({ audit: 'task.requeued', ...base }, 'queued task taken over: its replica stopped');
      else log.warn({ audit: 'task.retried', ...base, attempt: e.attempt }, 'task re-run: its replica stopped');
    }),
    events.on('task.handed_over', (e) => {
      log.info({ audit: 'task.handed_over', task: e.taskId, principal: e.principal, tool: e.tool, why: e.why }, 'task handed over: this replica shuts down');
    }),
    events.on('access.denied', (e) => accessDenied(log, e)),
    events.on('upstream.token', (e) => credential(log, e)),
    events.on('webhook.dead_lettered', (e) => {
      log.warn({ audit: 'webhook.dead_lettered', endpoint: e.endpoint, webhookId: e.webhookId, type: e.type, attempts: e.attempts, reason: e.reason }, 'webhook delivery dead-lettered: no further try');
    }),
    events.on('rate.limited', (e) => {
      // Once per counted window: every refusal is a metric, not a log line (a client hammering a limit would
      // otherwise write one line per request).
      if (e.firstInWindow !== true) return;
      log.info({ audit: 'rate.limited', principal: e.principal, limit: e.limit, retryAfterMs: e.retryAfterMs }, 'rate limit reached');
    }),
    ...connectionLines(events, log),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}

function taskEnded(log: AuditLogger, e: GatewayEventMap['task.ended']): void {
  const audit = `task.${e.status}`;
  // A task failed as lost is audited as task.lost (task.recovered, with the replica that stopped); one failed at
  // shutdown never was.
  if (e.reason === 'lost' || e.reason === 'drained') return;
  if (e.kept === true) log.info({ audit, task: e.taskId }, 'kept task outcome written');
  else if (e.status === 'cancelled') log.info({ audit, task: e.taskId, principal: e.principal, era: e.era }, 'task cancelled');
  else if (e.reason !== undefined) log.info({ audit, task: e.taskId, principal: e.principal, reason: e.reason }, 'task failed');
  else log.info({ audit, task: e.taskId, principal: e.principal }, `task ${e.status}`);
}

/**
 * A refusal, in words naming its real cause: credentials, a cross-site write, an endpoint for admins, an approval
 * its caller may not decide; only the tool, prompt and resource refusals are `auth.access`'s.
 */
function accessDenied(log: AuditLogger, e: GatewayEventMap['access.denied']): void {
  const endpoint = e.name === undefined ? {} : { endpoint: e.name };
  if (e.kind === 'credentials') {
    log.info({ audit: 'access.denied', ...endpoint, reason: e.reason, status: e.status }, 'request refused: credentials');
  } else if (e.kind === 'cross-site') {
    log.info({ audit: 'access.denied', kind: e.kind, ...endpoint, reason: e.reason, status: e.status }, 'request refused: a write a page on another origin could have sent');
  } else if (e.kind === 'admin') {
    log.info({ audit: 'access.denied', principal: e.principal, kind: e.kind, ...endpoint, reason: e.reason }, 'request refused: not an admin');
  } else if (e.kind === 'approval') {
    log.info({ audit: 'access.denied', principal: e.principal, kind: e.kind, tool: e.name, task: e.taskId, reason: e.reason }, `approval refused: ${e.reason ?? 'not allowed to decide it'}`);
  } else if (e.taskId !== undefined) {
    log.info({ audit: 'access.denied', principal: e.principal, kind: e.kind, name: e.name, task: e.taskId }, 'task hidden: auth.access denies its tool');
  } else {
    log.info({ audit: 'access.denied', principal: e.principal, kind: e.kind, name: e.name }, 'access denied by auth.access');
  }
}

/**
 * Under which identity the gateway acts at an upstream: each credential it obtained or signed (once per cache miss or
 * refresh, not per call), for a caller (`principal`) or for itself (none), and each it could not get. The event
 * carries no token, no secret and no server-written text; nor does the line.
 */
function credential(log: AuditLogger, e: GatewayEventMap['upstream.token']): void {
  const who = e.principal === undefined ? 'the gateway' : 'a caller';
  const base = { upstream: e.upstream, grant: e.grant, ...(e.principal !== undefined && { principal: e.principal }) };
  if (e.outcome === 'ok') {
    log.info({ audit: 'credential.obtained', ...base }, `upstream credential obtained for ${who}`);
    return;
  }
  const why = { outcome: e.outcome, cause: e.cause, ...(e.oauthError !== undefined && { oauthError: e.oauthError }), ...(e.status !== undefined && { status: e.status }) };
  log.warn({ audit: 'credential.failed', ...base, ...why }, `no upstream credential for ${who}`);
}

/** Per-user consent (issue 41): who was asked to connect where, who connected, refreshed, disconnected; no token ever. */
function connectionLines(events: GatewayEvents, log: AuditLogger): (() => void)[] {
  const about = (e: ConnectionFacts) => ({ principal: e.principal, upstream: e.upstream, ...(e.issuer !== undefined && { issuer: e.issuer }) });
  return [
    events.on('consent.requested', (e) => log.info({ audit: 'consent.requested', ...about(e), via: e.via }, 'connect link made for a caller without a connection')),
    events.on('consent.started', (e) => log.info({ audit: 'consent.started', ...about(e) }, 'consent flow started: browser sent to the authorization server')),
    events.on('consent.refused', (e) => log.warn({ audit: 'consent.refused', ...about(e), reason: e.reason }, `consent refused: ${e.reason}`)),
    events.on('connection.created', (e) => log.info({ audit: 'connection.created', ...about(e), scopes: e.scopes }, 'user connected an upstream account')),
    events.on('connection.refreshed', (e) => log.info({ audit: 'connection.refreshed', ...about(e), rotated: e.rotated }, 'connection token refreshed')),
    events.on('connection.revoked', (e) => log.info({ audit: 'connection.revoked', ...about(e), by: e.by, revokedAtServer: e.revokedAtServer }, 'connection removed')),
    events.on('connection.failed', (e) => log.warn({ audit: 'connection.failed', ...about(e), step: e.step, reason: e.reason }, `connection ${e.step} failed`)),
  ];
}
