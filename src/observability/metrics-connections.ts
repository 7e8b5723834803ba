// Per-user consent metrics (issue 41): links made, consents started, completed and refused, refreshes and failures,
// connections removed, by upstream (configured names: bounded) and by the gateway's own words for reasons (a fixed
// set). Counters per replica; sum() across replicas is the cluster's.
import { Counter, type Registry } from 'prom-client';
import type { GatewayEvents } from '../events.js';
import type { MetricLabels } from './metrics-context.js';

/** Reasons a label may name; anything else (an authorization server's own error word) is `other`: labels stay few. */
const REASONS = new Set([
  'link_unknown', 'wrong_user', 'state_unknown', 'state_mismatch', 'issuer_mismatch', 'denied', 'untrusted_server', 'exchange_failed',
  'invalid_grant', 'invalid_client', 'invalid_request', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope', 'access_denied',
  'timeout', 'unreachable', 'http_status', 'oauth_error', 'invalid_response',
]);
const reasonLabel = (reason: string): string => (REASONS.has(reason) ? reason : 'other');

export function subscribeConnectionMetrics(registry: Registry, events: GatewayEvents, labels: MetricLabels): () => void {
  const counter = (name: string, help: string, labelNames: string[]) => new Counter({ name, help, labelNames, registers: [registry] });
  const requested = counter('taskgate_consent_requests_total', 'Connect links made for callers without a connection, by upstream and how they were asked (call, task, connections).', ['upstream', 'via']);
  const started = counter('taskgate_consents_started_total', 'Consent flows a browser started (sent to the authorization server), by upstream.', ['upstream']);
  const refused = counter('taskgate_consents_refused_total', 'Consents that did not go through, by upstream and reason (wrong_user, state_mismatch, denied, ...).', ['upstream', 'reason']);
  const created = counter('taskgate_connections_created_total', 'Users who connected their account (consents completed), by upstream.', ['upstream']);
  const refreshed = counter('taskgate_connection_refreshes_total', 'Access tokens refreshed (one per expiry across replicas), by upstream and whether the refresh token rotated.', ['upstream', 'rotated']);
  const revoked = counter('taskgate_connections_revoked_total', 'Connections removed, by upstream and by whom (user, server).', ['upstream', 'by']);
  const failed = counter('taskgate_connection_failures_total', 'Token requests for connections that failed, by upstream, step and reason.', ['upstream', 'step', 'reason']);
  const upstream = (name: string) => labels.upstream.of(name);
  const offs = [
    events.on('consent.requested', (e) => requested.inc({ upstream: upstream(e.upstream), via: e.via })),
    events.on('consent.started', (e) => started.inc({ upstream: upstream(e.upstream) })),
    events.on('consent.refused', (e) => refused.inc({ upstream: upstream(e.upstream), reason: reasonLabel(e.reason) })),
    events.on('connection.created', (e) => created.inc({ upstream: upstream(e.upstream) })),
    events.on('connection.refreshed', (e) => refreshed.inc({ upstream: upstream(e.upstream), rotated: String(e.rotated) })),
    events.on('connection.revoked', (e) => revoked.inc({ upstream: upstream(e.upstream), by: e.by })),
    events.on('connection.failed', (e) => failed.inc({ upstream: upstream(e.upstream), step: e.step, reason: reasonLabel(e.reason) })),
  ];
  return () => offs.forEach((off) => off());
}
