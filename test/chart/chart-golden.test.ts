// Golden renders of the chart for a few value sets (test/chart/golden/<set>.yaml): a template change shows up as a
// reviewable diff. After a deliberate change: `npm run test:chart:golden` rewrites them; review and commit the diff.
// What the chart includes from files/ (alert rules, dashboard, helm test script) is elided: their owners change them
// without touching the templates, and chart-render.test.ts validates them as rendered.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { render } from '../helpers/helm.js';
import type { K8sObject } from '../helpers/k8s-schemas.js';

const GOLDEN_DIR = fileURLToPath(new URL('golden/', import.meta.url));
const UPDATE = process.env.TASKGATE_UPDATE_GOLDEN === '1';
const SETS = ['required', 'full', 'cluster'];

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- rendered YAML, edited by path

/** The render with the files/ includes replaced by their names. */
function elided(objects: K8sObject[]): K8sObject[] {
  return objects.map((object) => {
    const copy = structuredClone(object) as Json;
    if (copy.kind === 'PrometheusRule') copy.spec.groups = '<files/prometheus-rules.yaml>';
    if (copy.kind === 'ConfigMap' && copy.data?.['taskgate.json'] !== undefined) copy.data['taskgate.json'] = '<files/grafana-dashboard.json>';
    if (copy.kind === 'ConfigMap' && copy.data?.['helm-test.mjs'] !== undefined) copy.data['helm-test.mjs'] = '<files/helm-test.mjs>';
    return copy as K8sObject;
  });
}

function goldenText(objects: K8sObject[]): string {
  const header = '# Golden render of the taskgate chart (test/chart/chart-golden.test.ts); `npm run test:chart:golden` rewrites it.\n';
  return header + elided(objects).map((o) => `---\n# ${o.kind}/${o.metadata.name}\n${stringify(o, { lineWidth: 0 })}`).join('');
}

describe('chart: golden renders', () => {
  for (const set of SETS) {
    it(`${set} values render as test/chart/golden/${set}.yaml`, async () => {
      const text = goldenText(await render({ values: [set] }));
      const file = join(GOLDEN_DIR, `${set}.yaml`);
      if (UPDATE) writeFileSync(file, text);
      assert.ok(existsSync(file), `no ${file}: run npm run test:chart:golden`);
      assert.equal(text, readFileSync(file, 'utf8'), `the render differs from ${file}: if the change is meant, run npm run test:chart:golden and commit the diff`);
    });
  }
});
