// The chart renders what a cluster accepts: `helm lint --strict`, and every object of the default (required-only),
// full and cluster value sets valid against its kind's schema with no unknown field; the values schema refuses what
// it does not know; restricted pods; the PDB, Service and ServiceMonitor select exactly the gateway's pods; the
// grace period leaves room for preStop and the gateway's shutdown; appVersion is the package's version.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { CHART_DIR, find, lint, render, renderText } from '../helpers/helm.js';
import { schemaProblems, type K8sObject } from '../helpers/k8s-schemas.js';

const VALUE_SETS = ['required', 'full', 'cluster'] as const;
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- rendered YAML, read by path

const podSpecOf = (objects: K8sObject[]): Json => (find(objects, 'Deployment') as Json).spec.template.spec;
const podLabelsOf = (objects: K8sObject[]): Record<string, string> => (find(objects, 'Deployment') as Json).spec.template.metadata.labels;
const selects = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);

describe('chart: lint and schemas', () => {
  it('Chart.yaml appVersion is the package version, and the image tag defaults to it', async () => {
    const chart = parse(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { appVersion: string };
    const pkg = JSON.parse(readFileSync(join(CHART_DIR, '../../package.json'), 'utf8')) as { version: string };
    assert.equal(chart.appVersion, pkg.version);
    const objects = await render({ values: ['required'] });
    assert.equal(podSpecOf(objects).containers[0].image, `taskgate:${pkg.version}`);
  });

  for (const set of VALUE_SETS) {
    it(`helm lint --strict passes with the ${set} values`, async () => {
      const result = await lint({ values: [set] });
      assert.ok(result.ok, result.stdout + result.stderr);
    });

    it(`every object of the ${set} render is valid for its kind, with no unknown field`, async () => {
      const objects = await render({ values: [set] });
      const problems = (await Promise.all(objects.map(schemaProblems))).flat();
      assert.deepEqual(problems, []);
    });
  }

  it('the checker finds unknown fields where the API server would refuse them, and leaves maps alone', async () => {
    const objects = await render({ values: ['full'] });
    const deployment = structuredClone(find(objects, 'Deployment')) as Json;
    deployment.spec.template.spec.containers[0].readinesProbe = {};
    deployment.spec.template.metadata.labels['example.com/any-label'] = 'fine';
    const monitor = structuredClone(find(objects, 'ServiceMonitor')) as Json;
    monitor.spec.endpoints[0].pth = '/metrics';
    const rule = structuredClone(find(objects, 'PrometheusRule')) as Json;
    rule.spec.groups[0].rules[0].expresion = 'up';
    assert.deepEqual(await schemaProblems(deployment as K8sObject), ['Deployment/mcp-gateway: unknown field .spec.template.spec.containers[0].readinesProbe']);
    assert.deepEqual(await schemaProblems(monitor as K8sObject), ['ServiceMonitor/mcp-gateway: unknown field .spec.endpoints[0].pth']);
    assert.deepEqual(await schemaProblems(rule as K8sObject), ['PrometheusRule/mcp-gateway: unknown field .spec.groups[0].rules[0].expresion']);
  });

  it('the full values render every kind the chart has', async () => {
    const kinds = new Set((await render({ values: ['full'] })).map((o) => o.kind));
    for (const kind of ['ConfigMap', 'Secret', 'ServiceAccount', 'Service', 'Deployment', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'NetworkPolicy', 'Ingress', 'HTTPRoute', 'ServiceMonitor', 'PrometheusRule', 'Pod']) {
      assert.ok(kinds.has(kind), `no ${kind}`);
    }
  });

  it('the values schema refuses unknown keys, wrong types and values outside an enum', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ replicaCont: 3 }, /replicaCont/],
      [{ 'ingress.hostz': [] }, /hostz/],
      [{ 'autoscaling.enabled': 'yes' }, /autoscaling/],
      [{ 'redis.mode': 'replicated' }, /redis/],
      [{ 'secretEnv.not-an-env-name': 'x' }, /secretEnv/],
    ];
    for (const [set, message] of cases) {
      const result = await renderText({ values: ['required'], set });
      assert.equal(result.ok, false, JSON.stringify(set));
      assert.match(result.stderr, message);
    }
  });
});

describe('chart: pods and selectors', () => {
  for (const set of VALUE_SETS) {
    it(`${set}: pods are restricted, probed, and rolled by config and secret checksums`, async () => {
      const objects = await render({ values: [set] });
      const pod = podSpecOf(objects);
      const [container] = pod.containers;
      assert.equal(pod.automountServiceAccountToken, false);
      assert.equal(pod.securityContext.runAsNonRoot, true);
      assert.equal(pod.securityContext.runAsUser, 1000);
      assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault');
      assert.deepEqual(container.securityContext.capabilities.drop, ['ALL']);
      assert.equal(container.securityContext.allowPrivilegeEscalation, false);
      assert.equal(container.securityContext.readOnlyRootFilesystem, true);
      assert.equal(container.startupProbe.httpGet.path, '/healthz');
      assert.equal(container.livenessProbe.httpGet.path, '/healthz');
      assert.equal(container.readinessProbe.httpGet.path, '/readyz');
      assert.ok(container.resources.requests.cpu && container.resources.requests.memory, 'requests set');
      assert.ok(container.volumeMounts.some((m: Json) => m.mountPath === '/tmp' && m.readOnly !== true), 'a writable /tmp');
      const annotations = (find(objects, 'Deployment') as Json).spec.template.metadata.annotations;
      assert.match(annotations['checksum/config'], /^[0-9a-f]{64}$/);
      assert.match(annotations['checksum/secret'], /^[0-9a-f]{64}$/);
      const sa = objects.find((o) => o.kind === 'ServiceAccount') as Json | undefined;
      if (sa !== undefined) assert.equal(sa.automountServiceAccountToken, false);
      const testPod = find(objects, 'Pod') as Json;
      assert.equal(testPod.spec.automountServiceAccountToken, false);
      assert.equal(testPod.spec.containers[0].securityContext.readOnlyRootFilesystem, true);
    });

    it(`${set}: the PDB, Service, ServiceMonitor and spread select exactly the gateway's pods`, async () => {
      const objects = await render({ values: [set] });
      const labels = podLabelsOf(objects);
      const deployment = find(objects, 'Deployment') as Json;
      assert.ok(selects(deployment.spec.selector.matchLabels, labels));
      const service = find(objects, 'Service') as Json;
      assert.ok(selects(service.spec.selector, labels), 'the Service selects the pods');
      assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
      const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget') as Json | undefined;
      if (pdb !== undefined) assert.deepEqual(pdb.spec.selector.matchLabels, deployment.spec.selector.matchLabels);
      // The test pod is not one of them: no Service traffic to it, and it counts in no PDB.
      assert.equal(selects(deployment.spec.selector.matchLabels, (find(objects, 'Pod') as Json).metadata.labels), false);
      for (const constraint of podSpecOf(objects).topologySpreadConstraints ?? []) {
        assert.deepEqual(constraint.labelSelector.matchLabels, deployment.spec.selector.matchLabels);
      }
      const monitor = objects.find((o) => o.kind === 'ServiceMonitor') as Json | undefined;
      if (monitor !== undefined) {
        assert.ok(selects(monitor.spec.selector.matchLabels, service.metadata.labels), 'the ServiceMonitor selects the Service');
        assert.ok(service.spec.ports.some((p: Json) => p.name === monitor.spec.endpoints[0].port), 'a Service port of that name');
      }
    });

    it(`${set}: terminationGracePeriodSeconds exceeds preStop + the gateway's shutdownTimeoutMs`, async () => {
      const objects = await render({ values: [set] });
      const pod = podSpecOf(objects);
      const config = parse((find(objects, 'ConfigMap', objects.find((o) => o.kind === 'Deployment')?.metadata.name) as Json).data['taskgate.yaml']);
      const preStop = Number(pod.containers[0].lifecycle?.preStop?.exec?.command?.[1] ?? 0);
      assert.ok(config.shutdownTimeoutMs > config.replicas.drainTimeoutMs, 'the drain ends before the shutdown deadline');
      assert.ok(pod.terminationGracePeriodSeconds * 1000 > preStop * 1000 + config.shutdownTimeoutMs);
    });
  }

  it('the container port follows config.listen.port, and the probes and Service use it by name', async () => {
    const objects = await render({ values: ['required'], set: { 'config.listen.port': 9000 } });
    const [container] = podSpecOf(objects).containers;
    assert.deepEqual(container.ports, [{ name: 'http', containerPort: 9000, protocol: 'TCP' }]);
    assert.equal(container.readinessProbe.httpGet.port, 'http');
    assert.ok((find(objects, 'Service') as Json).spec.ports.every((p: Json) => p.targetPort === 'http'));
  });

  it('a PDB is left out when only one replica runs (it would block every node drain)', async () => {
    const objects = await render({ values: ['required'], set: { replicaCount: 1 } });
    assert.equal(objects.some((o) => o.kind === 'PodDisruptionBudget'), false);
  });

  it('given topology constraints replace the default spread and get the pods\' selector', async () => {
    const objects = await render({ values: ['required'], set: { topologySpreadConstraints: [{ maxSkew: 2, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule' }] } });
    const constraints = podSpecOf(objects).topologySpreadConstraints;
    assert.equal(constraints.length, 1);
    assert.equal(constraints[0].maxSkew, 2);
    assert.deepEqual(constraints[0].labelSelector.matchLabels, (find(objects, 'Deployment') as Json).spec.selector.matchLabels);
  });
});
