// The chart's alert rules and Grafana dashboard (charts/taskgate/files) name only metrics a gateway exports (issue 42
// item 4). A real gateway on the shared Redis, with auth, an approval rule and a webhook on, is scraped; every PromQL
// expression of both files is parsed with Prometheus' own parser and each metric it selects must be a family of the
// scrape (a histogram's _bucket, _sum and _count series). Each file's structure is checked too: what the chart's
// PrometheusRule and the Grafana sidecar need, and the scoping every query relies on.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { startWebhookReceiver } from '../fixtures/webhook-receiver.js';
import { suiteScope, type Json, type TestGateway } from '../helpers/harness.js';
import { selectorsOf, type Selector } from '../helpers/promql-names.js';
import { sharedRedisStore } from '../helpers/shared-redis.js';

const FILES = new URL('../../charts/taskgate/files/', import.meta.url);
const ADMIN_KEY = 'metrics-names-admin-key-0123456789';
/** Metrics a query may name that the gateway does not export: Prometheus' own scrape health. */
const PROMETHEUS_OWN = new Set(['up']);
/** What the chart's `tpl` substitutes, as a test release would have it. */
const RELEASE = { fullname: 'taskgate-test', namespace: 'taskgate-ns' };

/** Every series name the scrape exports, by its `# TYPE` lines (a histogram's family is its _bucket, _sum and _count). */
function exportedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const family = name as string;
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(family + suffix);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(family + suffix);
    else names.add(family);
  }
  return names;
}

/** The rules file as the chart renders it: Helm's two placeholders substituted, its escaped Prometheus templates unwrapped. */
function renderedRules(): unknown {
  const source = readFileSync(new URL('prometheus-rules.yaml', FILES), 'utf8');
  const ESCAPED = /\{\{ "((?:[^"\\]|\\.)*)" \}\}/g;
  // tpl renders the whole file, comments too: any other template there would be Helm's to run (or to fail on).
  const others = [...source.replaceAll(ESCAPED, '').matchAll(/\{\{.*?\}\}/g)].map((m) => m[0]).filter((t) => t !== '{{ include "taskgate.fullname" . }}' && t !== '{{ .Release.Namespace }}');
  assert.deepEqual(others, [], 'templates other than the two the chart substitutes and escaped Prometheus ones');
  const rendered = source
    .replaceAll('{{ include "taskgate.fullname" . }}', RELEASE.fullname)
    .replaceAll('{{ .Release.Namespace }}', RELEASE.namespace)
    .replaceAll(ESCAPED, (_, literal: string) => literal);
  return parse(rendered);
}

interface Rule {
  alert?: unknown;
  expr?: unknown;
  for?: unknown;
  labels?: { severity?: unknown };
  annotations?: { summary?: unknown; description?: unknown };
}

/** Every alert's expression, with the structure a PrometheusRule's groups need checked on the way. */
function alertExpressions(groups: unknown): Map<string, string> {
  assert.ok(Array.isArray(groups) && groups.length > 0, 'a list of rule groups');
  const groupNames = new Set<string>();
  const alerts = new Map<string, string>();
  for (const group of groups as { name?: unknown; rules?: unknown }[]) {
    assert.ok(typeof group.name === 'string' && !groupNames.has(group.name), `a group without a name of its own: ${JSON.stringify(group.name)}`);
    groupNames.add(group.name);
    assert.ok(Array.isArray(group.rules) && group.rules.length > 0, `group ${group.name} has no rules`);
    for (const rule of group.rules as Rule[]) {
      const where = `${group.name}/${String(rule.alert)}`;
      assert.ok(typeof rule.alert === 'string' && /^[A-Z][A-Za-z0-9]+$/.test(rule.alert) && !alerts.has(rule.alert), `${where}: an alert needs a name of its own`);
      assert.ok(typeof rule.expr === 'string' && rule.expr.trim() !== '', `${where}: expr`);
      assert.match(String(rule.for), /^(\d+(ms|s|m|h))+$/, `${where}: for`);
      assert.ok(['critical', 'warning', 'info'].includes(String(rule.labels?.severity)), `${where}: labels.severity`);
      for (const key of ['summary', 'description'] as const) assert.ok(typeof rule.annotations?.[key] === 'string' && rule.annotations[key] !== '', `${where}: annotations.${key}`);
      alerts.set(rule.alert, rule.expr);
    }
  }
  return alerts;
}

interface Panel {
  id?: unknown;
  type?: unknown;
  title?: unknown;
  datasource?: { type?: unknown; uid?: unknown };
  gridPos?: Record<string, unknown>;
  targets?: { expr?: unknown; datasource?: { uid?: unknown } }[];
  panels?: Panel[];
}

const DATASOURCE = '${datasource}';

/** Every query of the dashboard (panel targets, and the selectors of its query variables), its structure checked. */
function dashboardQueries(dashboard: { panels?: Panel[]; templating?: { list?: Json[] } }): { targets: string[]; variables: string[] } {
  const variables = dashboard.templating?.list ?? [];
  const source = variables.find((v) => v.name === 'datasource');
  assert.deepEqual([source?.type, source?.query], ['datasource', 'prometheus'], 'a data-source variable `datasource` of type prometheus');
  const variableQueries = variables.filter((v) => v.type === 'query').map((v) => {
    assert.equal((v.datasource as Json | undefined)?.uid, DATASOURCE, `variable ${String(v.name)}: datasource`);
    const query = v.query as string | { query?: string };
    return typeof query === 'string' ? query : (query.query ?? '');
  });
  const ids = new Set<unknown>();
  const targets: string[] = [];
  const visit = (panel: Panel): void => {
    const where = `panel ${String(panel.id)} (${String(panel.title)})`;
    assert.ok(typeof panel.id === 'number' && !ids.has(panel.id), `${where}: an id of its own`);
    ids.add(panel.id);
    assert.equal(panel.datasource?.uid, DATASOURCE, `${where}: datasource`);
    for (const key of ['h', 'w', 'x', 'y']) assert.equal(typeof panel.gridPos?.[key], 'number', `${where}: gridPos.${key}`);
    for (const target of panel.targets ?? []) {
      if (target.datasource !== undefined) assert.equal(target.datasource.uid, DATASOURCE, `${where}: a target's datasource`);
      assert.ok(typeof target.expr === 'string' && target.expr !== '', `${where}: a target without expr`);
      targets.push(target.expr);
    }
    assert.ok(panel.type === 'row' || (panel.targets ?? []).length > 0, `${where}: a panel without queries`);
    for (const inner of panel.panels ?? []) visit(inner);
  };
  assert.ok((dashboard.panels ?? []).length > 0, 'panels');
  for (const panel of dashboard.panels ?? []) visit(panel);
  return { targets, variables: variableQueries.map(variableSelector).filter((expr) => expr !== undefined) };
}

/** The PromQL inside a Grafana query variable: label_values(<expr>, label) or query_result(<expr>); none for label_values(label). */
function variableSelector(query: string): string | undefined {
  const labelValues = /^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)$/.exec(query.trim());
  if (labelValues !== null) return labelValues[1];
  const result = /^query_result\((.+)\)$/.exec(query.trim());
  if (result !== null) return result[1];
  assert.match(query.trim(), /^label_values\([A-Za-z_][A-Za-z0-9_]*\)$/, `a query variable this test cannot read: ${query}`);
  return undefined;
}

/** Grafana's interval variables are no PromQL: a duration stands in for them. */
function asPromql(expr: string): string {
  return expr.replaceAll(/\$__(rate_interval|interval|range)\b/g, '5m');
}

function assertExported(where: string, selectors: Selector[], exported: Set<string>): void {
  for (const { metric } of selectors) assert.ok(exported.has(metric) || PROMETHEUS_OWN.has(metric), `${where} names ${metric}, which the gateway does not export`);
}

describe('alerts and dashboard name exported metrics', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let exported: Set<string>;

  before(async () => {
    const store = sharedRedisStore(scope, 'metrics-names');
    const receiver = await startWebhookReceiver();
    scope.defer(() => receiver.close());
    const upstream = await scope.upstream('stdio');
    gateway = await scope.gateway({
      store,
      upstreams: { fx: upstream.config },
      auth: { resource: 'http://127.0.0.1/mcp', apiKeys: [{ principal: 'ops', key: ADMIN_KEY }], admin: { principals: ['key:ops'] } },
      tasks: { defaults: { mode: 'optional' }, rules: [{ match: 'slow', approval: { approvers: ['key:ops'], timeoutMs: 60_000 } }] },
      webhooks: [{ url: receiver.url, secret: receiver.secret, events: ['task.completed'] }],
    });
    const response = await fetch(`${gateway.origin}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    assert.equal(response.status, 200);
    exported = exportedNames(await response.text());
  });

  test('every alert parses, names exported metrics only, and is scoped to the release', () => {
    const alerts = alertExpressions(renderedRules());
    for (const required of ['TaskgateNoReadyReplica', 'TaskgateStoreDown', 'TaskgateLeaseRenewalsFailing', 'TaskgateTasksLost', 'TaskgateUpstreamDown', 'TaskgateApprovalExpiringSoon', 'TaskgateWebhookDeadLetters', 'TaskgateUpstreamCredentialFailing']) {
      assert.ok(alerts.has(required), `the issue's alert ${required}`);
    }
    for (const [alert, expr] of alerts) {
      const selectors = selectorsOf(expr);
      assert.ok(selectors.length > 0, `${alert} selects nothing`);
      assertExported(alert, selectors, exported);
      // Another release's (or another job's) series must never fire this release's alerts.
      for (const { metric, matchers } of selectors) {
        assert.deepEqual([matchers.get('job'), matchers.get('namespace')], [{ op: '=', value: RELEASE.fullname }, { op: '=', value: RELEASE.namespace }], `${alert}: ${metric} without the release's job and namespace`);
      }
    }
    // "No ready replica" must fire when no replica is scraped at all, not only when the scraped ones say 0.
    assert.match(alerts.get('TaskgateNoReadyReplica') ?? '', /absent\(taskgate_ready\{/);
  });

  test('every dashboard query parses, names exported metrics only, and follows the variables', () => {
    const dashboard = JSON.parse(readFileSync(new URL('grafana-dashboard.json', FILES), 'utf8')) as Parameters<typeof dashboardQueries>[0];
    const { targets, variables } = dashboardQueries(dashboard);
    for (const expr of variables) assertExported(`the variable query ${expr}`, selectorsOf(expr), exported);
    const named = new Set<string>();
    for (const expr of targets) {
      const selectors = selectorsOf(asPromql(expr));
      assertExported(expr, selectors, exported);
      for (const { metric, matchers } of selectors) {
        named.add(metric.replace(/_(bucket|sum|count)$/, ''));
        for (const label of ['namespace', 'job', 'instance']) assert.deepEqual(matchers.get(label), { op: '=~', value: `$${label}` }, `${expr}: ${metric} ignores $${label}`);
      }
    }
    // The gateway's own metrics (not the process defaults) all have a panel: a metric added later gets one too.
    const families = [...exported].filter((name) => !/^taskgate_(process|nodejs)_/.test(name)).map((name) => name.replace(/_(bucket|sum|count)$/, ''));
    const unseen = [...new Set(families)].filter((family) => !named.has(family));
    assert.deepEqual(unseen, [], 'metrics the dashboard shows nowhere');
  });
});
