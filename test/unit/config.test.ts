// The config file's contract, through parseConfig and loadConfig (what `taskgate serve` reads it with): the contract
// example and the shipped configs, defaults and shapes, `${VAR}` interpolation and the TASKGATE_* overrides, errors
// located at file:line:column with did-you-mean, task policy and its globs, hosts without tasks, the rendered effective
// config, auth, and tool selection per upstream. One file because its groups, one per part of the file format, share
// the helpers at its top (the configs/ fixture paths, parse, parseErrors, errorsOf).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { isAbsolute } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { ConfigError, loadConfig, parseConfig } from '../../src/config/load.js';
import { configErrorsOf } from '../helpers/config-errors.js';
import { globMatches, resolvePolicy } from '../../src/config/policy.js';
import { redactUrl, renderEffectiveConfig } from '../../src/config/render.js';
import { DEFAULT_POLICY, DEFAULTS } from '../../src/config/schema.js';
import { didYouMean } from '../../src/config/suggest.js';
import type { HttpUpstreamConfig, StdioUpstreamConfig, TasksConfig } from '../../src/config/types.js';

const CONFIGS = new URL('./configs/', import.meta.url);
const configPath = (name: string): string => new URL(name, CONFIGS).pathname;

const errorsOf = configErrorsOf;

const parse = (text: string, env: Record<string, string> = {}) => parseConfig(text, 'test.yaml', env);
const parseErrors = (text: string, env: Record<string, string> = {}) => errorsOf(() => parse(text, env));

describe('config: the contract example', () => {
  const config = loadConfig(configPath('valid.yaml'), { CI_TOKEN: 'tok' });

  it('maps upstreams to an array in file order with names and default prefixes', () => {
    assert.deepEqual(
      config.upstreams.map((u) => [u.name, u.transport, u.prefix]),
      [
        ['everything', 'stdio', 'everything__'],
        ['ci', 'streamable-http', 'ci__'],
        ['old', 'sse', 'old__'],
      ],
    );
  });

  it('fills stdio and http defaults', () => {
    const stdio = config.upstreams[0] as StdioUpstreamConfig;
    assert.deepEqual(stdio, {
      name: 'everything',
      transport: 'stdio',
      prefix: 'everything__',
      requestTimeoutMs: 60_000,
      initializeTimeoutMs: 30_000,
      taskConcurrency: 0,
      maxMessageBytes: 16_777_216,
      maxSessions: 256,
      command: 'node',
      args: ['path/to/server.js'],
      env: { API_KEY: 'dev-key' },
      cwd: '.',
      isolation: 'shared',
      idleTimeoutMs: 300_000,
      restart: { initialDelayMs: 500, maxDelayMs: 30_000 },
      stopGraceMs: 5_000,
    });
    const http = config.upstreams[1] as HttpUpstreamConfig;
    assert.deepEqual(http, {
      name: 'ci',
      transport: 'streamable-http',
      prefix: 'ci__',
      requestTimeoutMs: 60_000,
      initializeTimeoutMs: 30_000,
      taskConcurrency: 0,
      maxMessageBytes: 16_777_216,
      maxSessions: 256,
      url: 'http://127.0.0.1:3001/mcp',
      headers: { Authorization: 'Bearer tok' },
      idleTimeoutMs: 300_000,
      connectTimeoutMs: 10_000,
      headersTimeoutMs: 0,
      bodyTimeoutMs: 0,
      protocol: 'auto',
    });
  });

  it('fills the remaining sections with defaults and normalizes mode aliases', () => {
    assert.ok(isAbsolute(config.source));
    assert.deepEqual(config.listen, {
      host: '127.0.0.1',
      port: 8080,
      path: '/mcp',
      maxBodyBytes: 4 * 1024 * 1024,
      maxBatchSize: 20,
      maxJsonDepth: 64,
      requestTimeoutMs: 30_000,
      headersTimeoutMs: 10_000,
      maxConnections: 1_024,
      maxConnectionsPerAddress: 256,
      keepAliveTimeoutMs: 5_000,
      maxInflightBytes: 256 * 1024 * 1024,
      maxInflightBytesPerPrincipal: 64 * 1024 * 1024,
      allowedOrigins: [],
      allowedHosts: [],
    });
    assert.deepEqual(config.store, { type: 'memory' });
    assert.deepEqual(config.tasks, {
      defaults: {
        mode: 'optional',
        ttlMs: 3_600_000,
        maxTtlMs: 86_400_000,
        pollIntervalMs: 1_000,
        maxRunMs: 0,
        taskAfterMs: 2_000,
        concurrency: 0,
        maxTasksPerPrincipal: 1_000,
        retry: { onLoss: false, maxAttempts: 1 },
        keepAliveProgressMs: 10_000,
        plainCalls: 'wait',
      },
      rules: [{ match: 'ci__*', mode: 'required' }],
      immediateResponse: DEFAULTS.immediateResponse,
      taskTools: {
        enabled: false,
        names: { result: 'taskgate_task_result', status: 'taskgate_task_status', cancel: 'taskgate_task_cancel', list: 'taskgate_task_list', delete: 'taskgate_task_delete' },
        waitSeconds: 20,
        maxWaitSeconds: 50,
      },
      maxStoredBytesPerPrincipal: 64 * 1024 * 1024,
      maxStoredBytes: 1024 * 1024 * 1024,
      maxResultBytes: 16 * 1024 * 1024,
      maxPendingApprovalsPerPrincipal: 100,
    });
    assert.deepEqual(config.sessions, { idleTimeoutMs: 1_800_000, maxPerPrincipal: 1_000, maxStreamsPerPrincipal: 100 });
    assert.deepEqual(config.sse, { keepAliveMs: 15_000, replayBufferSize: 1_000, jsonWindowMs: 50, maxBufferedBytesPerStream: 8_388_608, maxBufferedBytes: 268_435_456 });
    assert.deepEqual(config.mrtr, { parkTimeoutMs: 300_000 });
    assert.deepEqual(config.lists, { pageSize: 1_000 });
    assert.deepEqual(config.replicas, { leaseMs: 3_000, drainTimeoutMs: 5_000, maxRunningTasks: 10_000 });
    assert.deepEqual(config.log, { level: 'info' });
    assert.equal(config.shutdownTimeoutMs, 10_000);
  });

  it('is deep-frozen', () => {
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.listen.allowedHosts));
    assert.ok(Object.isFrozen(config.upstreams[0]));
    assert.ok(Object.isFrozen((config.upstreams[0] as StdioUpstreamConfig).args));
    assert.ok(Object.isFrozen(config.tasks.rules[0]));
    assert.throws(() => {
      (config.listen as { port: number }).port = 1;
    }, TypeError);
  });

  it('the shipped example configs are valid', () => {
    const example = loadConfig(new URL('../../config/taskgate.example.yaml', import.meta.url).pathname, {});
    assert.equal(example.store.type, 'memory');
    assert.equal(example.upstreams[0]?.transport, 'stdio');
    assert.equal(example.upstreams[0]?.prefix, '');
    const docker = loadConfig(new URL('../../config/taskgate.docker.yaml', import.meta.url).pathname, {});
    assert.deepEqual(docker.store, { type: 'redis', url: 'redis://redis:6379', prefix: 'taskgate', commandTimeoutMs: 5000 });
    assert.equal(docker.listen.host, '0.0.0.0');
  });
});

describe('config: defaults and shapes', () => {
  it('needs only one upstream; its prefix defaults to ""', () => {
    const config = parse('upstreams:\n  only: { command: node }\n');
    assert.equal(config.upstreams.length, 1);
    assert.equal(config.upstreams[0]?.prefix, '');
    assert.equal(config.upstreams[0]?.transport, 'stdio');
  });

  it('infers streamable-http from url', () => {
    const config = parse('upstreams:\n  web: { url: "https://example.com/mcp" }\n');
    assert.equal(config.upstreams[0]?.transport, 'streamable-http');
  });

  it('accepts an explicit empty prefix among several upstreams', () => {
    const config = parse('upstreams:\n  a: { command: a, prefix: "" }\n  b: { command: b }\n  c: { command: c, prefix: "x." }\n');
    assert.deepEqual(config.upstreams.map((u) => u.prefix), ['', 'b__', 'x.']);
  });

  it('keeps file order even for integer-like names', () => {
    const config = parse('upstreams:\n  zeta: { command: z }\n  "10": { command: x }\n  "2": { command: y }\n');
    assert.deepEqual(config.upstreams.map((u) => u.name), ['zeta', '10', '2']);
  });

  it('turns numbers in env, args and headers into strings', () => {
    const config = parse(
      'upstreams:\n  a: { command: node, args: [--port, 3000], env: { DEBUG: true, N: 1 } }\n  b: { url: "http://x/", headers: { X-N: 5 } }\n',
    );
    const a = config.upstreams[0] as StdioUpstreamConfig;
    assert.deepEqual(a.args, ['--port', '3000']);
    assert.deepEqual(a.env, { DEBUG: 'true', N: '1' });
    assert.deepEqual((config.upstreams[1] as HttpUpstreamConfig).headers, { 'X-N': '5' });
  });

  it('fills redis defaults', () => {
    const config = parse('store: { type: redis }\nupstreams: { a: { command: a } }\n');
    assert.deepEqual(config.store, { type: 'redis', url: 'redis://127.0.0.1:6379', prefix: 'taskgate', commandTimeoutMs: 5000 });
  });

  it('normalizes never/always in defaults and rules; keeps only the fields a rule sets', () => {
    const config = parse(
      'upstreams: { a: { command: a } }\ntasks:\n  defaults: { mode: never, ttlMs: 1000 }\n  rules:\n    - { match: "x*", mode: always, concurrency: 2 }\n',
    );
    assert.equal(config.tasks.defaults.mode, 'forbidden');
    assert.equal(config.tasks.defaults.ttlMs, 1000);
    assert.equal(config.tasks.defaults.maxTtlMs, DEFAULT_POLICY.maxTtlMs);
    assert.deepEqual(config.tasks.rules, [{ match: 'x*', mode: 'required', concurrency: 2 }]);
  });

  it('ignores x- top-level sections and resolves anchors and merge keys', () => {
    const config = parse(
      'x-node: &node { command: node, env: { A: "1" } }\nupstreams:\n  a: *node\n  b: { <<: *node, args: [b.js] }\n',
    );
    assert.deepEqual(
      config.upstreams.map((u) => [u.name, (u as StdioUpstreamConfig).command, (u as StdioUpstreamConfig).args]),
      [
        ['a', 'node', []],
        ['b', 'node', ['b.js']],
      ],
    );
  });
});

describe('config: environment', () => {
  it('interpolates ${VAR}, ${VAR:-default}, ${VAR-default} and $${ in every string value', () => {
    const config = parse(
      [
        // Plain (unquoted) ${...} works in block style; inside { } flow maps it must be quoted.
        'listen:',
        '  host: ${HOST}',
        '  port: ${PORT:-9000}',
        '  path: "/${P-mcp}"',
        'upstreams:',
        '  a: { command: "${CMD:-node}", args: ["$${NOT_A_VAR}", "${EMPTY:-fallback}", "${EMPTY-kept}x"] }',
        'log: { level: "${LEVEL:-debug}" }',
      ].join('\n'),
      { HOST: '0.0.0.0', EMPTY: '' },
    );
    assert.equal(config.listen.host, '0.0.0.0');
    assert.equal(config.listen.port, 9000);
    assert.equal(config.listen.path, '/mcp');
    const a = config.upstreams[0] as StdioUpstreamConfig;
    assert.equal(a.command, 'node');
    assert.deepEqual(a.args, ['${NOT_A_VAR}', 'fallback', 'x']);
    assert.equal(config.log.level, 'debug');
  });

  it('reports an unset variable with file, line, column and key, once', () => {
    const errors = parseErrors('upstreams:\n  ci:\n    url: http://x/mcp\n    headers:\n      Authorization: "Bearer ${CI_TOKEN}"\n');
    assert.equal(errors.length, 1);
    assert.deepEqual(
      { ...errors[0], message: undefined },
      { file: 'test.yaml', line: 5, column: 22, path: 'upstreams.ci.headers.Authorization', message: undefined },
    );
    assert.match(errors[0]?.message ?? '', /CI_TOKEN is not set/);
  });

  it('does not add a follow-up schema error for a value whose variable is unset', () => {
    const errors = parseErrors('upstreams:\n  ci: { url: "${CI_URL}" }\n');
    assert.deepEqual(errors.map((e) => e.path), ['upstreams.ci.url']);
    assert.match(errors[0]?.message ?? '', /CI_URL is not set/);
  });

  it('reports malformed references', () => {
    const errors = parseErrors('upstreams:\n  a: { command: "${1BAD}", args: ["${OPEN"] }\n');
    assert.equal(errors.length, 2);
    assert.match(errors[0]?.message ?? '', /malformed/);
    assert.match(errors[1]?.message ?? '', /unterminated/);
  });

  it('TASKGATE_PORT, TASKGATE_LOG_LEVEL and TASKGATE_REDIS_URL override the file', () => {
    const text = 'listen: { port: 1234 }\nstore: { type: redis, url: "redis://a:1", prefix: tg2 }\nupstreams: { a: { command: a } }\n';
    const config = parse(text, { TASKGATE_PORT: '4321', TASKGATE_LOG_LEVEL: 'warn', TASKGATE_REDIS_URL: 'rediss://b:2' });
    assert.equal(config.listen.port, 4321);
    assert.equal(config.log.level, 'warn');
    assert.deepEqual(config.store, { type: 'redis', url: 'rediss://b:2', prefix: 'tg2', commandTimeoutMs: 5000 });

    const keepsTimeout = parse('store: { type: redis, commandTimeoutMs: 700 }\nupstreams: { a: { command: a } }\n', { TASKGATE_REDIS_URL: 'redis://c:3' });
    assert.deepEqual(keepsTimeout.store, { type: 'redis', url: 'redis://c:3', prefix: 'taskgate', commandTimeoutMs: 700 });

    const fromMemory = parse('upstreams: { a: { command: a } }\n', { TASKGATE_REDIS_URL: 'redis://r:6379' });
    assert.deepEqual(fromMemory.store, { type: 'redis', url: 'redis://r:6379', prefix: 'taskgate', commandTimeoutMs: 5000 });

    const emptyIgnored = parse('upstreams: { a: { command: a } }\n', { TASKGATE_PORT: '', TASKGATE_REDIS_URL: '' });
    assert.equal(emptyIgnored.listen.port, 8080);
    assert.equal(emptyIgnored.store.type, 'memory');
  });

  it('names the variable when an override is invalid', () => {
    const errors = parseErrors('upstreams: { a: { command: a } }\n', { TASKGATE_PORT: '70000', TASKGATE_REDIS_URL: 'http://x' });
    assert.deepEqual(
      errors.map((e) => [e.file, e.path]),
      [
        ['environment variable TASKGATE_PORT', 'listen.port'],
        ['environment variable TASKGATE_REDIS_URL', 'store.url'],
      ],
    );
    assert.match(errors[0]?.message ?? '', /<= 65535/);
  });
});

describe('config: located errors', () => {
  it('collects every problem with file:line:column, key path and did-you-mean', () => {
    const errors = errorsOf(() => loadConfig(configPath('invalid.yaml'), {}));
    const file = configPath('invalid.yaml');
    assert.deepEqual(
      errors.map((e) => [e.file, e.line, e.column, e.path]),
      [
        [file, 3, 3, 'listen.prot'],
        [file, 7, 5, 'upstreams.ci.url'],
        [file, 9, 15, 'tasks.defaults.mode'],
      ],
    );
    assert.match(errors[0]?.message ?? '', /unknown key \(did you mean "port"\?\)/);
    assert.equal(errors[1]?.message, 'expected an http(s) URL');
    assert.match(errors[2]?.message ?? '', /expected one of forbidden, optional, required, always, never/);
  });

  it('formats the message as file:line:col: path: message, one line per problem', () => {
    try {
      loadConfig(configPath('invalid.yaml'), {});
      assert.fail('expected an error');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      const lines = err.message.split('\n');
      assert.equal(lines.length, 3);
      assert.equal(lines[1], `${configPath('invalid.yaml')}:7:5: upstreams.ci.url: expected an http(s) URL`);
    }
  });

  it('locates YAML syntax errors', () => {
    const errors = errorsOf(() => loadConfig(configPath('syntax-error.yaml'), {}));
    assert.ok(errors.length >= 1);
    assert.equal(errors[0]?.line, 3);
    assert.match(errors[0]?.message ?? '', /^invalid YAML: /);
  });

  it('reports duplicate keys', () => {
    const errors = parseErrors('upstreams: { a: { command: a } }\nlog: { level: info }\nlog: { level: warn }\n');
    assert.equal(errors[0]?.line, 3);
    assert.match(errors[0]?.message ?? '', /unique/);
  });

  it('a missing file is a ConfigError naming the file', () => {
    const errors = errorsOf(() => loadConfig('/nonexistent/taskgate.yaml', {}));
    assert.deepEqual(errors.map((e) => [e.file, e.line]), [['/nonexistent/taskgate.yaml', 0]]);
    assert.match(errors[0]?.message ?? '', /no such file/);
  });

  it('requires at least one upstream', () => {
    assert.match(parseErrors('listen: {}\n')[0]?.message ?? '', /at least one upstream/);
    assert.match(parseErrors('upstreams: {}\n')[0]?.message ?? '', /at least one upstream/);
    assert.match(parseErrors('')[0]?.message ?? '', /empty/);
    assert.match(parseErrors('- a\n')[0]?.message ?? '', /map of settings/);
  });

  it('checks upstream names, transports, URLs and keys per transport', () => {
    const errors = parseErrors(
      [
        'upstreams:', //                                            1
        '  "bad name": { command: x }', //                          2
        '  web: { transport: streamableHttp, url: "http://x" }', // 3
        '  sse: { transport: sse, url: "ws://x/sse" }', //          4
        '  s: { command: node, url: "http://x", header: {} }', //   5
        '  h: { url: "http://x", headrs: {} }', //                  6
        '  none: { args: [] }', //                                  7
      ].join('\n'),
    );
    const byPath = Object.fromEntries(errors.map((e) => [e.path, `${e.line}:${e.column} ${e.message}`]));
    assert.match(byPath['upstreams["bad name"]'] ?? '', /^2:3 upstream names may contain only/);
    assert.match(byPath['upstreams.web.transport'] ?? '', /^3:10 .*did you mean "streamable-http"/);
    assert.match(byPath['upstreams.sse.url'] ?? '', /^4:26 expected an http\(s\) URL/);
    assert.match(byPath['upstreams.s.url'] ?? '', /^5:23 unknown key for a stdio upstream \(it belongs to streamable-http\/sse/);
    assert.match(byPath['upstreams.s.header'] ?? '', /^5:40 unknown key/);
    assert.match(byPath['upstreams.h.headrs'] ?? '', /did you mean "headers"/);
    assert.match(byPath['upstreams.none.transport'] ?? '', /^7:3 required: one of stdio, streamable-http, sse/);
  });

  it('requires the drain to end before the shutdown deadline', () => {
    const errors = parseErrors(['upstreams:', '  a: { command: a }', 'replicas: { drainTimeoutMs: 20000 }', 'shutdownTimeoutMs: 10000'].join('\n'));
    const drain = errors.find((e) => e.path === 'replicas.drainTimeoutMs');
    assert.match(drain?.message ?? '', /must be < shutdownTimeoutMs \(10000\)/);
  });

  it('requires the headers to be due no later than the whole request', () => {
    const errors = parseErrors(['listen: { requestTimeoutMs: 5000, headersTimeoutMs: 6000 }', 'upstreams:', '  a: { command: a }'].join('\n'));
    const headers = errors.find((e) => e.path === 'listen.headersTimeoutMs');
    assert.match(headers?.message ?? '', /must be <= listen\.requestTimeoutMs \(5000\)/);
  });

  it('requires a budget of bytes in flight to hold two bodies of the largest size (or to be unlimited)', () => {
    const errors = parseErrors(['listen: { maxBodyBytes: 1000, maxInflightBytes: 1999, maxInflightBytesPerPrincipal: 0 }', 'upstreams:', '  a: { command: a }'].join('\n'));
    assert.deepEqual(errors.map((e) => e.path), ['listen.maxInflightBytes']);
    assert.match(errors[0]?.message ?? '', /must be 0 \(unlimited\) or at least 2 × listen\.maxBodyBytes \(2000\)/);
    const fits = parse(['listen: { maxBodyBytes: 1000, maxInflightBytes: 2000, maxInflightBytesPerPrincipal: 2000 }', 'upstreams:', '  a: { command: a }'].join('\n'));
    assert.equal(fits.listen.maxInflightBytesPerPrincipal, 2000);
  });

  it('checks numbers, enums and cross-field limits', () => {
    const errors = parseErrors(
      [
        'listen: { port: 70000, path: mcp, maxBodyBytes: 0 }',
        'upstreams:',
        '  a: { command: a, requestTimeoutMs: 1.5, isolation: per-client, restart: { initialDelayMs: 100, maxDelayMs: 10 } }',
        '  b: { url: "http://127.0.0.1:1/mcp", protocol: 2026 }',
        'tasks:',
        '  defaults: { ttlMs: 10, maxTtlMs: 5 }',
        '  rules: [ { match: "" }, { match: x, tool: y }, { match: y, ttlMs: 99999999999 } ]',
        'sessions: { idleTimeoutMs: -1 }',
        'mrtr: { parkTimeoutMs: 0 }',
        'log: { level: verbose }',
        'shutdownTimeoutMs: soon',
      ].join('\n'),
    );
    const paths = errors.map((e) => e.path);
    for (const p of [
      'listen.port',
      'listen.path',
      'listen.maxBodyBytes',
      'upstreams.a.requestTimeoutMs',
      'upstreams.a.isolation',
      'upstreams.a.restart.maxDelayMs',
      'tasks.rules[0].match',
      'tasks.rules[1].tool',
      'sessions.idleTimeoutMs',
      'upstreams.b.protocol',
      'mrtr.parkTimeoutMs',
      'log.level',
      'shutdownTimeoutMs',
    ]) {
      assert.ok(paths.includes(p), `expected an error at ${p}; got ${paths.join(', ')}`);
    }
    const message = (p: string) => errors.find((e) => e.path === p)?.message ?? '';
    assert.match(message('listen.port'), /<= 65535, got 70000/);
    assert.match(message('upstreams.a.requestTimeoutMs'), /expected an integer, got 1.5/);
    assert.match(message('shutdownTimeoutMs'), /expected an integer, got "soon"/);
    assert.match(message('upstreams.a.restart.maxDelayMs'), />= initialDelayMs/);
    assert.deepEqual(
      errors.map((e) => e.line),
      [...errors.map((e) => e.line)].sort((a, b) => a - b),
      'errors are sorted by position',
    );
  });

  it('takes maxMessageBytes on every transport, between 64 KiB and 512 MiB', () => {
    const config = parseConfig(
      ['upstreams:', '  a: { command: a, maxMessageBytes: 268435456 }', '  b: { url: "http://127.0.0.1:1/mcp", maxMessageBytes: "65536" }', '  c: { transport: sse, url: "http://127.0.0.1:1/sse" }'].join('\n'),
      'test.yaml',
      {},
    );
    assert.deepEqual(config.upstreams.map((u) => u.maxMessageBytes), [268_435_456, 65_536, 16_777_216]);
    const errors = parseErrors(['upstreams:', '  a: { command: a, maxMessageBytes: 16 }', '  b: { url: "http://127.0.0.1:1/mcp", maxMessageBytes: 1073741824 }'].join('\n'));
    const message = (p: string) => errors.find((e) => e.path === p)?.message ?? '';
    assert.match(message('upstreams.a.maxMessageBytes'), />= 65536, got 16/);
    assert.match(message('upstreams.b.maxMessageBytes'), /<= 536870912, got 1073741824/);
  });

  it('takes maxSessions on every transport: 256 by default, 0 for unbounded, never negative', () => {
    const config = parseConfig(
      ['upstreams:', '  a: { command: a, isolation: per-session, maxSessions: 8 }', '  b: { url: "http://127.0.0.1:1/mcp", maxSessions: 0 }', '  c: { transport: sse, url: "http://127.0.0.1:1/sse" }'].join('\n'),
      'test.yaml',
      {},
    );
    assert.deepEqual(config.upstreams.map((u) => u.maxSessions), [8, 0, 256]);
    const errors = parseErrors(['upstreams:', '  a: { url: "http://127.0.0.1:1/mcp", maxSessions: -1 }'].join('\n'));
    assert.match(errors.find((e) => e.path === 'upstreams.a.maxSessions')?.message ?? '', />= 0, got -1/);
  });

  it('checks allowed origins and hosts for the shapes the headers have', () => {
    const errors = parseErrors(
      'listen:\n  allowedOrigins: ["*", "https://a.example", "http://localhost:8080/", "localhost"]\n  allowedHosts: [localhost, "a.example:8443", "http://x"]\nupstreams: { a: { command: a } }\n',
    );
    assert.deepEqual(errors.map((e) => e.path), ['listen.allowedOrigins[2]', 'listen.allowedOrigins[3]', 'listen.allowedHosts[2]']);
    assert.match(errors[0]?.message ?? '', /no path/);
    assert.equal(errors[0]?.column, 46);
    const ok = parse('listen: { allowedHosts: [MyHost.Example] }\nupstreams: { a: { command: a } }\n');
    assert.deepEqual(ok.listen.allowedHosts, ['myhost.example']);
  });

  it('checks ttlMs against maxTtlMs, for defaults and for rules merged onto them', () => {
    const defaults = parseErrors('upstreams: { a: { command: a } }\ntasks: { defaults: { ttlMs: 10, maxTtlMs: 5 } }\n');
    assert.deepEqual(defaults.map((e) => e.path), ['tasks.defaults.ttlMs']);
    const rules = parseErrors('upstreams: { a: { command: a } }\ntasks: { rules: [ { match: y, ttlMs: 99999999999 } ] }\n');
    assert.deepEqual(rules.map((e) => e.path), ['tasks.rules[0].ttlMs']);
    assert.match(rules[0]?.message ?? '', /must not exceed maxTtlMs \(86400000\)/);
  });

  it('suggests top-level keys, tolerating case and snake_case', () => {
    const errors = parseErrors('upstreams: { a: { command: a } }\nsesions: {}\nshutdown_timeout_ms: 5\nlisten: { MaxBodyBytes: 5 }\nzzz: 1\n');
    assert.deepEqual(
      errors.map((e) => e.message),
      [
        'unknown key (did you mean "sessions"?)',
        'unknown key (did you mean "shutdownTimeoutMs"?)',
        'unknown key (did you mean "maxBodyBytes"?)',
        errors[3]?.message,
      ],
    );
    assert.match(errors[3]?.message ?? '', /^unknown key; expected one of listen, store, upstreams.*"x-"/);
  });
});

describe('config: task policy', () => {
  const tasks: TasksConfig = {
    defaults: { ...DEFAULT_POLICY },
    rules: [
      { match: 'ci__deploy', mode: 'forbidden' },
      { match: 'ci__*', mode: 'required', ttlMs: 60_000 },
      { match: 'tool.v?', concurrency: 3 },
    ],
    immediateResponse: '',
    taskTools: {
      enabled: false,
      names: { result: 'taskgate_task_result', status: 'taskgate_task_status', cancel: 'taskgate_task_cancel', list: 'taskgate_task_list', delete: 'taskgate_task_delete' },
      waitSeconds: 20,
      maxWaitSeconds: 50,
    },
    maxStoredBytesPerPrincipal: 0,
    maxStoredBytes: 0,
    maxResultBytes: 16 * 1024 * 1024,
    maxPendingApprovalsPerPrincipal: 100,
  };

  it('stored-result budgets: 0 turns a budget off, a result limit has a floor of 1024 bytes', () => {
    const config = parse('upstreams:\n  a: { command: x }\ntasks:\n  maxStoredBytesPerPrincipal: 0\n  maxStoredBytes: "2048"\n  maxResultBytes: 1024\n');
    assert.equal(config.tasks.maxStoredBytesPerPrincipal, 0);
    assert.equal(config.tasks.maxStoredBytes, 2048);
    assert.equal(config.tasks.maxResultBytes, 1024);
    const errors = parseErrors('upstreams:\n  a: { command: x }\ntasks:\n  maxResultBytes: 0\n  maxStoredBytes: -1\n');
    assert.ok(errors.some((e) => /maxResultBytes/.test(e.path)), JSON.stringify(errors));
    assert.ok(errors.some((e) => /maxStoredBytes/.test(e.path)), JSON.stringify(errors));
  });

  it('first matching rule wins, merged onto the defaults', () => {
    assert.deepEqual(resolvePolicy(tasks, 'ci__deploy'), { ...DEFAULT_POLICY, mode: 'forbidden' });
    assert.deepEqual(resolvePolicy(tasks, 'ci__build'), { ...DEFAULT_POLICY, mode: 'required', ttlMs: 60_000 });
    assert.deepEqual(resolvePolicy(tasks, 'other'), DEFAULT_POLICY);
  });

  it('glob: * any run, ? one character, everything else literal', () => {
    assert.equal(resolvePolicy(tasks, 'tool.v2').concurrency, 3);
    assert.equal(resolvePolicy(tasks, 'toolXv2').concurrency, 0, '"." is literal');
    assert.equal(resolvePolicy(tasks, 'tool.v').concurrency, 0, '"?" needs one character');
    assert.ok(globMatches('*', ''));
    assert.ok(globMatches('a*b', 'ab'));
    assert.ok(globMatches('a*b', 'a/x\nb'));
    assert.ok(!globMatches('a*b', 'abc'));
    assert.ok(globMatches('(x)+[y]', '(x)+[y]'));
  });

  it('retry on loss: two attempts unless said otherwise; maxAttempts must be at least 1', () => {
    const config = parse('upstreams:\n  a: { command: x }\ntasks:\n  rules:\n    - { match: "a__safe", retry: { onLoss: true } }\n    - { match: "a__thrice", retry: { onLoss: true, maxAttempts: 3 } }\n');
    assert.deepEqual(resolvePolicy(config.tasks, 'a__safe').retry, { onLoss: true, maxAttempts: 2 });
    assert.deepEqual(resolvePolicy(config.tasks, 'a__thrice').retry, { onLoss: true, maxAttempts: 3 });
    assert.deepEqual(resolvePolicy(config.tasks, 'a__other').retry, { onLoss: false, maxAttempts: 1 });
    const errors = parseErrors('upstreams:\n  a: { command: x }\ntasks:\n  rules:\n    - { match: "*", retry: { onLoss: true, maxAttempts: 0 } }\n');
    assert.ok(errors.some((e) => /maxAttempts/.test(e.path)), JSON.stringify(errors));
  });

  it('returns a fresh object each time', () => {
    const policy = resolvePolicy(tasks, 'other');
    policy.mode = 'required';
    assert.equal(resolvePolicy(tasks, 'other').mode, 'optional');
  });
});

describe('config: hosts without tasks (the issue 14 contract)', () => {
  const upstreams = 'upstreams: { fx: { command: node } }\n';

  it('plainCalls per rule; the task tools turn on with the first background rule, named under the prefix', () => {
    const config = parse(`${upstreams}tasks:\n  rules:\n    - { match: 'build_*', plainCalls: background, taskAfterMs: 30000 }\n    - { match: 'ask_*', plainCalls: wait }\n`);
    assert.equal(resolvePolicy(config.tasks, 'build_all').plainCalls, 'background');
    assert.equal(resolvePolicy(config.tasks, 'build_all').taskAfterMs, 30_000);
    assert.equal(resolvePolicy(config.tasks, 'ask_me').plainCalls, 'wait');
    assert.equal(resolvePolicy(config.tasks, 'other').plainCalls, 'wait');
    assert.equal(config.tasks.taskTools.enabled, true);
    assert.deepEqual(config.tasks.taskTools.names, { result: 'taskgate_task_result', status: 'taskgate_task_status', cancel: 'taskgate_task_cancel', list: 'taskgate_task_list', delete: 'taskgate_task_delete' });
  });

  it('task tools: on or off by hand, renamed by prefix or one by one, waits bounded', () => {
    const config = parse(`${upstreams}tasks:\n  taskTools: { enabled: true, prefix: 'jobs.', names: { list: my_jobs }, waitSeconds: 5, maxWaitSeconds: 25 }\n`);
    assert.deepEqual(config.tasks.taskTools, {
      enabled: true,
      names: { result: 'jobs.task_result', status: 'jobs.task_status', cancel: 'jobs.task_cancel', list: 'my_jobs', delete: 'jobs.task_delete' },
      waitSeconds: 5,
      maxWaitSeconds: 25,
    });
    assert.equal(parse(`${upstreams}tasks: { defaults: { plainCalls: background }, taskTools: { enabled: auto } }\n`).tasks.taskTools.enabled, true);
  });

  it('issue 39 #11: a rule with approval answers plain callers with a handle unless it says plainCalls itself; the task tools come with it', () => {
    const auth = 'auth: { resource: "http://127.0.0.1/mcp", apiKeys: [{ principal: ops, key: ops-key-0123456789abcdef }] }\n';
    const held = (rule: string, tools = '') => parse(`${upstreams}${auth}tasks:\n  rules: [{ match: 'deploy_*', ${rule}approval: { approvers: [ops], timeoutMs: 60000 } }]\n${tools}`);
    const byDefault = held('');
    assert.equal(resolvePolicy(byDefault.tasks, 'deploy_prod').plainCalls, 'background');
    assert.equal(resolvePolicy(byDefault.tasks, 'deploy_prod').approval?.onCallerGone, 'keep');
    assert.equal(resolvePolicy(byDefault.tasks, 'other').plainCalls, 'wait', 'other tools keep the defaults');
    assert.equal(byDefault.tasks.taskTools.enabled, true);
    const waiting = held('plainCalls: wait, ');
    assert.equal(resolvePolicy(waiting.tasks, 'deploy_prod').plainCalls, 'wait');
    assert.equal(waiting.tasks.taskTools.enabled, true, 'a held call may outlive its plain caller, who fetches the result with them');
    const cancelling = parse(`${upstreams}${auth}tasks:\n  rules: [{ match: 'deploy_*', plainCalls: wait, approval: { approvers: [ops], timeoutMs: 60000, onCallerGone: cancel } }]\n`);
    assert.equal(cancelling.tasks.taskTools.enabled, false);
    assert.equal(held('plainCalls: wait, ', '  taskTools: { enabled: false }\n').tasks.taskTools.enabled, false);
    const refused = errorsOf(() => held('', '  taskTools: { enabled: false }\n')).map((e) => `${e.path}: ${e.message}`);
    assert.match(refused[0] ?? '', /^tasks\.taskTools\.enabled: plainCalls: background \(tasks\.rules\[0\], whose approval makes plainCalls default to background\) needs the task tools/);
  });

  it('rejects what cannot work, at the line that says it', () => {
    const at = (yaml: string) => parseErrors(`${upstreams}${yaml}`).map((e) => `${e.path}: ${e.message}`);
    assert.deepEqual(at('tasks:\n  defaults: { plainCalls: later }\n'), ['tasks.defaults.plainCalls: expected one of wait, background; got "later"']);
    assert.match(at('tasks:\n  rules: [{ match: x, plainCalls: background }]\n  taskTools: { enabled: false }\n')[0] ?? '', /^tasks\.taskTools\.enabled: plainCalls: background \(tasks\.rules\[0\]\) needs the task tools/);
    assert.match(at('tasks:\n  taskTools: { waitSeconds: 60 }\n')[0] ?? '', /^tasks\.taskTools\.waitSeconds: must not exceed maxWaitSeconds \(50\)/);
    assert.match(at('tasks:\n  taskTools: { names: { result: "has space" } }\n')[0] ?? '', /^tasks\.taskTools\.names\.result: a tool name is/);
    assert.match(at('tasks:\n  taskTools: { names: { reslt: x } }\n')[0] ?? '', /unknown key \(did you mean "result"\?\)/);
  });
});

describe('config: rendering and helpers', () => {
  it('renders the effective config as YAML that is itself a valid config, with secrets redacted', () => {
    const config = parse(
      [
        'store: { type: redis, url: "redis://:hunter2@r:6379/0" }',
        'upstreams:',
        '  a: { command: node, env: { TOKEN: s3cret } }',
        '  b: { url: "https://u:pw@x/mcp?api_key=k1&v=1", headers: { Authorization: Bearer t0k } }',
        'tasks: { rules: [ { match: "a__*", mode: never } ] }',
      ].join('\n'),
    );
    const out = renderEffectiveConfig(config);
    for (const secret of ['hunter2', 's3cret', 'pw@', 'k1', 't0k']) assert.ok(!out.includes(secret), `leaked ${secret}`);
    const docs = parseAllDocuments(out);
    assert.ok(Array.isArray(docs) && docs.length === 2);
    const [effective, policy] = docs.map((d) => d.toJS() as Record<string, unknown>);
    const reparsed = parseConfig(JSON.stringify(effective), 'rendered', {});
    assert.deepEqual(reparsed.upstreams.map((u) => [u.name, u.prefix]), [
      ['a', 'a__'],
      ['b', 'b__'],
    ]);
    assert.deepEqual((policy?.taskPolicy as { rules: unknown[] }).rules, [{ match: 'a__*', ...DEFAULT_POLICY, mode: 'forbidden' }]);
  });

  it('redactUrl leaves plain URLs alone', () => {
    assert.equal(redactUrl('http://127.0.0.1:3001/mcp'), 'http://127.0.0.1:3001/mcp');
    assert.equal(redactUrl('redis://:pw@h:1/2'), 'redis://:[redacted]@h:1/2');
  });

  it('didYouMean', () => {
    assert.equal(didYouMean('prot', ['host', 'port', 'path']), 'port');
    assert.equal(didYouMean('completely-different', ['host', 'port']), undefined);
    assert.equal(didYouMean('STORE', ['store']), 'store');
  });
});

describe('config: auth (the issue 13 contract)', () => {
  const upstreams = 'upstreams:\n  fx: { command: node }\n';
  const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

  it('the contract example: keys from the environment are kept only as their hash; the audience defaults to the resource', () => {
    const config = parse(
      `${upstreams}auth:
  resource: https://gw.example.com/mcp
  apiKeys:
    - { principal: alice, key: "\${ALICE_KEY}" }
    - { principal: ci, sha256: "${sha256('ci-key-0123456789abcdef')}", scopes: [admin] }
  oauth:
    issuer: https://idp.example.com
  access:
    - { principals: [alice, "team-*"], tools: ["*"] }
    - { principals: [bob], tools: [greet, slow_compute] }
    - { scopes: [admin], tools: ["*"] }
`,
      { ALICE_KEY: 'alice-key-0123456789abcdef' },
    );
    const auth = config.auth;
    assert.ok(auth !== undefined);
    assert.equal(auth.resource, 'https://gw.example.com/mcp');
    assert.deepEqual(auth.apiKeys, [
      { principal: 'alice', sha256: sha256('alice-key-0123456789abcdef'), scopes: [] },
      { principal: 'ci', sha256: sha256('ci-key-0123456789abcdef'), scopes: ['admin'] },
    ]);
    assert.ok(!JSON.stringify(config).includes('alice-key-0123456789abcdef'), 'the key itself is not kept');
    assert.deepEqual(auth.oauth, { issuer: 'https://idp.example.com', jwksUri: undefined, audience: 'https://gw.example.com/mcp', requiredScopes: [], clockToleranceSeconds: 5 });
    assert.equal(auth.access?.length, 3);
    assert.deepEqual(auth.access?.[1], { principals: ['bob'], scopes: [], tools: ['greet', 'slow_compute'], prompts: [], resources: [] });
    assert.ok(!renderEffectiveConfig(config).includes('alice-key-0123456789abcdef'));
  });

  it('rate limits: unlimited by default; rules keep only the rates they name', () => {
    const key = 'apiKeys: [{ principal: a, key: "0123456789abcdefgh" }]';
    assert.deepEqual(parse(`${upstreams}auth:\n  resource: https://gw.example.com/mcp\n  ${key}\n`).auth?.rateLimits, {
      requestsPerSecond: 0,
      taskCreationsPerMinute: 0,
      rules: [],
    });
    const limited = parse(
      `${upstreams}auth:\n  resource: https://gw.example.com/mcp\n  ${key}\n  rateLimits: { requestsPerSecond: 20, rules: [{ principals: ["ci-*"], requestsPerSecond: 200 }] }\n`,
    );
    assert.deepEqual(limited.auth?.rateLimits, { requestsPerSecond: 20, taskCreationsPerMinute: 0, rules: [{ principals: ['ci-*'], requestsPerSecond: 200 }] });
    const issues = parseErrors(`${upstreams}auth:\n  resource: https://gw.example.com/mcp\n  ${key}\n  rateLimits: { rules: [{ principals: [x], requestPerSecond: 1 }] }\n`);
    assert.match(issues.map((issue) => `${issue.path}: ${issue.message}`).join('\n'), /requestPerSecond.*did you mean "requestsPerSecond"/);
  });

  it('identity: an API key\'s name may not start with key: or oauth: (rules read those as qualifiers)', () => {
    const messages = (yaml: string): string => parseErrors(`${upstreams}auth:\n  resource: https://gw.example.com/mcp\n${yaml}`).map((issue) => `${issue.path}: ${issue.message}`).join('\n');
    assert.match(messages('  apiKeys: [{ principal: "oauth:carol", key: "0123456789abcdefgh" }]\n'), /apiKeys\[0\]\.principal: .*may not start with "key:" or "oauth:"/);
    assert.match(messages('  apiKeys: [{ principal: "key:carol", key: "0123456789abcdefgh" }]\n'), /may not start with/);
    assert.equal(parse(`${upstreams}auth:\n  resource: https://gw.example.com/mcp\n  apiKeys: [{ principal: "team:carol", key: "0123456789abcdefgh" }]\n`).auth?.apiKeys[0]?.principal, 'team:carol');
  });

  it('oauth: the clock tolerance is configurable (0 to 300 s, default 5); an issuer URL has no query or fragment', () => {
    const messages = (yaml: string): string => parseErrors(`${upstreams}auth:\n  resource: https://gw.example.com/mcp\n${yaml}`).map((issue) => `${issue.path}: ${issue.message}`).join('\n');
    assert.equal(parse(`${upstreams}auth:\n  resource: https://gw.example.com/mcp\n  oauth: { issuer: https://idp.example.com, clockToleranceSeconds: 30 }\n`).auth?.oauth?.clockToleranceSeconds, 30);
    assert.match(messages('  oauth: { issuer: https://idp.example.com, clockToleranceSeconds: 301 }\n'), /clockToleranceSeconds/);
    assert.match(messages('  oauth: { issuer: https://idp.example.com, clockToleranceSeconds: -1 }\n'), /clockToleranceSeconds/);
    assert.match(messages('  oauth: { issuer: "https://idp.example.com/#x" }\n'), /oauth\.issuer: .*no query or fragment/);
    assert.match(messages('  oauth: { issuer: "https://idp.example.com/?tenant=x" }\n'), /oauth\.issuer: .*no query or fragment/);
  });

  it('no auth section: undefined (today\'s behaviour)', () => {
    assert.equal(parse(upstreams).auth, undefined);
  });

  it('located errors: neither key nor hash, both, a short key, no way to authenticate, a rule naming nobody', () => {
    const messages = (yaml: string): string[] => parseErrors(`${upstreams}${yaml}`).map((issue) => `${issue.path}: ${issue.message}`);
    assert.match(messages('auth:\n  resource: https://gw.example.com/mcp\n  apiKeys: [{ principal: a }]\n').join('\n'), /either key or sha256/);
    assert.match(messages(`auth:\n  resource: https://gw.example.com/mcp\n  apiKeys: [{ principal: a, key: "0123456789abcdefgh", sha256: "${sha256('x')}" }]\n`).join('\n'), /either key or sha256/);
    assert.match(messages('auth:\n  resource: https://gw.example.com/mcp\n  apiKeys: [{ principal: a, key: short }]\n').join('\n'), /at least 16 characters/);
    assert.match(messages('auth:\n  resource: https://gw.example.com/mcp\n').join('\n'), /apiKeys, oauth, or both/);
    assert.match(messages('auth:\n  resource: not a url\n  apiKeys: [{ principal: a, key: "0123456789abcdefgh" }]\n').join('\n'), /http\(s\) URL/);
    assert.match(
      messages('auth:\n  resource: https://gw.example.com/mcp\n  apiKeys: [{ principal: a, key: "0123456789abcdefgh" }]\n  access: [{ tools: ["*"] }]\n').join('\n'),
      /names principals or scopes/,
    );
  });
});

describe('config: tool selection per upstream (the issue 23 contract)', () => {
  const selectionConfig = [
    'upstreams:',
    '  a:',
    '    command: node',
    '    tools:',
    '      include: ["*"]',
    '      exclude: [drop_*]',
    '      overrides:',
    '        greet: { name: hello, title: Hello, description: Says hello }',
    '    prompts: { exclude: [internal_*] }',
    '    resources: { include: ["file:///*"] }',
    '',
  ].join('\n');

  it('reads tools (include, exclude, overrides), prompts and resources', () => {
    const [a] = parse(selectionConfig).upstreams;
    assert.deepEqual(a?.tools, { include: ['*'], exclude: ['drop_*'], overrides: { greet: { name: 'hello', title: 'Hello', description: 'Says hello' } } });
    assert.deepEqual(a?.prompts, { exclude: ['internal_*'] });
    assert.deepEqual(a?.resources, { include: ['file:///*'], exclude: [] });
  });

  it('leaves the selection out where none is written', () => {
    const [a] = parse('upstreams:\n  a:\n    command: node\n').upstreams;
    assert.equal(a?.tools, undefined);
    assert.equal(a?.prompts, undefined);
    assert.equal(a?.resources, undefined);
  });

  it('refuses two overrides with one new name, a bad new name, and unknown keys, at their lines', () => {
    const errors = parseErrors([
      'upstreams:',
      '  a:',
      '    command: node',
      '    tools:',
      '      overrides:',
      '        greet: { name: hello }',
      '        wave: { name: hello }',
      '        bad: { name: "has space" }',
      '        odd: { nmae: x }',
      '    prompts: { exlude: [x] }',
      '',
    ].join('\n'));
    const byPath = Object.fromEntries(errors.map((e) => [e.path, `${e.line} ${e.message}`]));
    assert.match(byPath['upstreams.a.tools.overrides.wave.name'] ?? '', /^7 'hello' is already the new name of tool 'greet'/);
    assert.match(byPath['upstreams.a.tools.overrides.bad.name'] ?? '', /^8 a tool name is/);
    assert.match(byPath['upstreams.a.tools.overrides.odd.nmae'] ?? '', /^9 unknown key \(did you mean "name"\?\)/);
    assert.match(byPath['upstreams.a.prompts.exlude'] ?? '', /^10 unknown key \(did you mean "exclude"\?\)/);
  });
});
