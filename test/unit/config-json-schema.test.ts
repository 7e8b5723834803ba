// config/taskgate.schema.json, the JSON Schema of the config file (scripts/config-json-schema.ts): the committed file
// is what the schema gives, every shipped config validates against it (as an editor would check it), and it refuses
// what the loader refuses for its type, while accepting the `${VAR}` references the loader interpolates.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { CONFIG_JSON_SCHEMA_PATH, renderConfigJsonSchema } from '../../scripts/config-json-schema.js';
import { parseConfig } from '../../src/config/load.js';

const committed = readFileSync(CONFIG_JSON_SCHEMA_PATH, 'utf8');
// Union types (`type: [string, number, boolean]`) are plain JSON Schema; Ajv's strict mode only asks to allow them.
const validate = new Ajv({ allErrors: true, allowUnionTypes: true }).compile(JSON.parse(committed) as object);

// As the loader reads it: merge keys (`<<`) on.
const yaml = (text: string): unknown => parse(text, { merge: true }) as unknown;
const ROOT = new URL('../../', import.meta.url);

describe('config JSON Schema (config/taskgate.schema.json)', () => {
  it('the committed file is what the schema gives (npm run docs:config regenerates it)', () => {
    assert.ok(committed === renderConfigJsonSchema(), 'config/taskgate.schema.json is stale: run `npm run docs:config`');
  });

  const examples = [
    ...readdirSync(new URL('config/', ROOT)).filter((f) => f.endsWith('.yaml')).map((f) => `config/${f}`),
    'docker/taskgate.sentinel.yaml',
    'test/unit/configs/valid.yaml',
  ];
  for (const file of examples) {
    it(`validates ${file}, which names it where it is a shipped example`, () => {
      const text = readFileSync(new URL(file, ROOT), 'utf8');
      assert.ok(validate(yaml(text)), JSON.stringify(validate.errors, null, 2));
      if (!file.startsWith('test/')) assert.match(text.split('\n')[0] ?? '', /^# yaml-language-server: \$schema=\S*taskgate\.schema\.json$/);
    });
  }

  it('finds the example configs (so the loop above checks something)', () => {
    assert.ok(examples.includes('config/taskgate.example.yaml') && examples.includes('config/taskgate.docker.yaml'));
  });

  const upstream = 'upstreams: { everything: { command: node } }\n';
  for (const [what, text, where] of [
    ['a port that is not a number', 'listen: { port: abc }\n', '/listen/port'],
    ['a number where a list of strings is required', 'listen: { allowedOrigins: 5 }\n', '/listen/allowedOrigins'],
    ['a number in a list of strings', 'auth: { resource: "https://gw.example", apiKeys: [{ principal: ci, key: "0123456789abcdef", scopes: [1] }] }\n', '/auth/apiKeys/0/scopes/0'],
    ['an unknown key', 'listen: { hots: x }\n', '/listen'],
    ['a value out of range', 'listen: { port: 70000 }\n', '/listen/port'],
    ['a value not in the enum', 'log: { level: loud }\n', '/log/level'],
  ] as const) {
    it(`refuses ${what}, as the loader does`, () => {
      assert.equal(validate(yaml(text + upstream)), false);
      assert.ok(validate.errors?.some((e) => e.instancePath === where), JSON.stringify(validate.errors));
      assert.throws(() => parseConfig(text + upstream, 'x.yaml', {}));
    });
  }

  it('accepts what the loader accepts: ${VAR} references, digit strings, `x-` anchors, transport left out', () => {
    const text = `x-common: &common { requestTimeoutMs: "30000" }
listen:
  port: \${PORT:-8080}
  path: \${MCP_PATH:-/mcp}
log:
  level: \${LOG_LEVEL:-info}
upstreams:
  local: { command: node, args: [server.js, 3001, true], <<: *common }
  remote: { url: "https://mcp.example/mcp", headers: { Authorization: "Bearer \${TOKEN:-t}" } }
  rev2025Side: { transport: sse, url: "https://mcp.example/sse" }
`;
    assert.ok(validate(yaml(text)), JSON.stringify(validate.errors, null, 2));
    assert.doesNotThrow(() => parseConfig(text, 'x.yaml', {}));
  });

  it('refuses an upstream whose transport nothing says', () => {
    assert.equal(validate(yaml('upstreams: { x: { headers: {} } }\n')), false);
    assert.equal(validate(yaml('upstreams: { x: { transport: sse, command: node } }\n')), false);
  });
});
