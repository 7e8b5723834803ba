// YAML file -> validated, defaulted, frozen GatewayConfig. Problems are collected (not just the first) and each is
// located at file:line:column with its key path, using the YAML document's node ranges.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { buildConfig } from './build.js';
import { ConfigError, type ConfigIssue } from './config-error.js';
import { interpolate, type Env } from './interpolate.js';
import { allowedKeysAt, passthroughSettings, RawConfigSchema, TRANSPORTS, upstreamKeys, type RawConfig } from './schema.js';
import { didYouMean } from './suggest.js';
import type { GatewayConfig } from './types.js';

export { ConfigError, formatIssue, type ConfigIssue } from './config-error.js';
export type { Env } from './interpolate.js';

type Path = readonly (string | number)[];

/** Reads and validates a config file. Throws ConfigError (also when the file can't be read). */
export function loadConfig(path: string, env: Env = process.env): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message;
    throw new ConfigError([{ file: path, line: 0, column: 0, path: '', message: `cannot read config file: ${reason}` }]);
  }
  return parseSource(text, path, resolve(path), env);
}

/** Validates config text; `sourceName` is used in messages and as `source`. */
export function parseConfig(text: string, sourceName: string, env: Env = process.env): GatewayConfig {
  return parseSource(text, sourceName, sourceName, env);
}

// Environment variables that override the file; operators set these per deployment without editing YAML.
const ENV_PORT = 'TASKGATE_PORT';
const ENV_REDIS_URL = 'TASKGATE_REDIS_URL';
const ENV_LOG_LEVEL = 'TASKGATE_LOG_LEVEL';

function parseSource(text: string, file: string, source: string, env: Env): GatewayConfig {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: true, merge: true });
  const at = (offset: number): { line: number; column: number } => {
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };
  const issues: ConfigIssue[] = [];

  if (doc.errors.length > 0) {
    // Later syntax errors are mostly knock-on effects of the first; a few are enough to find it.
    for (const e of doc.errors.slice(0, 3)) {
      const message = (e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
      issues.push({ file, ...at(e.pos[0]), path: '', message: `invalid YAML: ${message}` });
    }
    throw new ConfigError(issues);
  }

  // Interpolate in the document rather than in the text, so a substituted value can never change YAML structure
  // and an unset variable is reported at its own line and key.
  const brokenPaths: string[] = [];
  walkScalars(doc.contents, [], (node, path) => {
    if (typeof node.value !== 'string') return;
    const result = interpolate(node.value, env);
    node.value = result.value;
    for (const message of result.errors) {
      issues.push({ file, ...at(node.range?.[0] ?? 0), path: formatPath(path), message });
    }
    if (result.errors.length > 0) brokenPaths.push(formatPath(path));
  });

  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    issues.push({ file, line: 1, column: 1, path: '', message: `invalid YAML: ${(err as Error).message}` });
    throw new ConfigError(issues);
  }
  if (raw === null || raw === undefined) {
    issues.push({ file, line: 1, column: 1, path: '', message: 'the config is empty; at least an `upstreams:` section is required' });
    throw new ConfigError(issues);
  }
  if (!isPlainObject(raw)) {
    issues.push({ file, ...at(doc.contents?.range?.[0] ?? 0), path: '', message: 'expected a map of settings at the top level' });
    throw new ConfigError(issues);
  }

  // `x-...` top-level keys hold YAML anchors for reuse (as in docker compose); they are not settings.
  for (const key of Object.keys(raw)) if (key.startsWith('x-')) delete raw[key];

  const overriddenBy = applyEnvOverrides(raw, env);
  // Forwarding the client's token is refused by name (the schema alone would only call it an unknown key).
  for (const { path, message, section } of passthroughSettings(raw)) {
    issues.push({ file, ...at(locate(doc, path)), path: formatPath(path), message });
    brokenPaths.push(formatPath(section));
  }

  const parsed = RawConfigSchema.safeParse(raw, { reportInput: true, error: describeIssue });
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      for (const { path, message } of explainIssue(issue)) {
        const dotted = formatPath(path);
        if (brokenPaths.some((p) => dotted === p || dotted.startsWith(`${p}.`) || dotted.startsWith(`${p}[`))) continue;
        const envName = overriddenBy.get(dotted);
        if (envName !== undefined) {
          issues.push({ file: `environment variable ${envName}`, line: 0, column: 0, path: dotted, message });
        } else {
          issues.push({ file, ...at(locate(doc, path)), path: dotted, message });
        }
      }
    }
  }
  if (issues.length > 0) {
    issues.sort((a, b) => (a.file === b.file ? a.line - b.line || a.column - b.column : a.file === file ? -1 : 1));
    throw new ConfigError(issues);
  }
  if (!parsed.success) throw new Error('unreachable: schema failed without issues');

  return deepFreeze(buildConfig(parsed.data, upstreamOrder(doc, parsed.data), source));
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Applies TASKGATE_* overrides to the raw object; returns which dotted paths came from which variable. */
function applyEnvOverrides(raw: Record<string, unknown>, env: Env): Map<string, string> {
  const by = new Map<string, string>();
  const section = (key: string): Record<string, unknown> | undefined => {
    const value = raw[key];
    if (value === undefined || value === null) return (raw[key] = {}) as Record<string, unknown>;
    return isPlainObject(value) ? value : undefined; // a wrong type is reported by the schema, not masked
  };
  const port = env[ENV_PORT];
  if (port !== undefined && port !== '') {
    const listen = section('listen');
    if (listen !== undefined) {
      listen.port = port;
      by.set('listen.port', ENV_PORT);
    }
  }
  const redisUrl = env[ENV_REDIS_URL];
  if (redisUrl !== undefined && redisUrl !== '') {
    const store = raw.store;
    const kept = isPlainObject(store) && store.type === 'redis' ? store : {};
    raw.store = { type: 'redis', url: redisUrl };
    // What the variable does not say stays as the file has it.
    for (const key of ['prefix', 'commandTimeoutMs'] as const) if (kept[key] !== undefined) (raw.store as Record<string, unknown>)[key] = kept[key];
    by.set('store.url', ENV_REDIS_URL);
  }
  const level = env[ENV_LOG_LEVEL];
  if (level !== undefined && level !== '') {
    const log = section('log');
    if (log !== undefined) {
      log.level = level;
      by.set('log.level', ENV_LOG_LEVEL);
    }
  }
  return by;
}

type ScalarNode = { value: unknown; range?: readonly [number, number, number] | null };

function keyText(key: unknown): string | undefined {
  if (isScalar(key)) return String(key.value);
  if (typeof key === 'string' || typeof key === 'number') return String(key);
  return undefined;
}

/** Visits every scalar value (not keys, not alias references: an anchor is visited where it is defined). */
function walkScalars(node: unknown, path: Path, visit: (node: ScalarNode, path: Path) => void): void {
  if (isMap(node)) {
    for (const pair of node.items) {
      const key = keyText(pair.key);
      if (key !== undefined) walkScalars(pair.value, [...path, key], visit);
    }
  } else if (isSeq(node)) {
    node.items.forEach((item, i) => walkScalars(item, [...path, i], visit));
  } else if (isScalar(node)) {
    visit(node, path);
  }
}

function rangeStart(node: unknown): number | undefined {
  if (node !== null && typeof node === 'object' && 'range' in node) {
    const range = (node as ScalarNode).range;
    if (range) return range[0];
  }
  return undefined;
}

/**
 * Source offset for a key path: the key of the deepest map entry on the path that exists in the file (so a missing
 * key points at its parent), or the item for list elements.
 */
function locate(doc: Document, path: Path): number {
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const segment of path) {
    if (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = node.items.find((p) => keyText(p.key) === String(segment));
      if (pair === undefined) return offset;
      offset = rangeStart(pair.key) ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      const item: unknown = node.items[segment];
      if (item === undefined) return offset;
      offset = rangeStart(item) ?? offset;
      node = item;
    } else {
      return offset;
    }
  }
  return offset;
}

export function formatPath(path: Path): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (/^[A-Za-z0-9_-]+$/.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

function describeValue(value: unknown): string {
  if (value === null) return 'an empty value';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a map';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return String(value);
}

const EXPECTED: Record<string, string> = {
  int: 'an integer',
  number: 'an integer', // every number in the config is an integer
  string: 'a string',
  object: 'a map (key: value)',
  record: 'a map (key: value)',
  array: 'a list',
  boolean: 'true or false',
};

/** Zod's per-parse error map: messages an operator can act on. Schema-level messages take precedence. */
const describeIssue: z.core.$ZodErrorMap = (issue) => {
  const input: unknown = issue.input;
  switch (issue.code) {
    case 'invalid_type': {
      if (input === undefined) {
        return issue.path?.length === 1 && issue.path[0] === 'upstreams' ? 'required: at least one upstream must be configured' : 'required';
      }
      const expected = EXPECTED[issue.expected] ?? String(issue.expected);
      return `expected ${expected}, got ${describeValue(input)}`;
    }
    case 'too_small': {
      if (issue.origin === 'string' && Number(issue.minimum) === 1) return 'must not be empty';
      if (issue.origin === 'array' || issue.origin === 'set') return `expected at least ${issue.minimum} items`;
      return `expected a value >= ${issue.minimum}, got ${describeValue(input)}`;
    }
    case 'too_big': {
      if (issue.origin === 'string') return `must be at most ${issue.maximum} characters`;
      if (issue.origin === 'array' || issue.origin === 'set') return `expected at most ${issue.maximum} items`;
      return `expected a value <= ${issue.maximum}, got ${describeValue(input)}`;
    }
    case 'invalid_value': {
      const allowed = issue.values.map(String);
      const hint = typeof input === 'string' ? didYouMean(input, allowed) : undefined;
      return `expected one of ${allowed.join(', ')}; got ${describeValue(input)}${hint ? ` (did you mean "${hint}"?)` : ''}`;
    }
    case 'invalid_format':
      return issue.format === 'regex' ? `does not match ${String(issue.pattern)}` : `expected a valid ${issue.format}`;
    default:
      return undefined;
  }
};

/** One zod issue -> located messages; unknown keys are split up so each points at its own line. */
function explainIssue(issue: z.core.$ZodIssue): { path: Path; message: string }[] {
  const path = issue.path.filter((s): s is string | number => typeof s !== 'symbol');
  switch (issue.code) {
    case 'unrecognized_keys': {
      const input = (issue as { input?: unknown }).input;
      return issue.keys.map((key) => ({ path: [...path, key], message: unknownKeyMessage(key, path, input) }));
    }
    case 'invalid_key':
      return [{ path, message: issue.issues[0]?.message ?? issue.message }];
    case 'invalid_union': {
      const discriminator = (issue as { discriminator?: string }).discriminator;
      if (discriminator === undefined) return [{ path, message: issue.message }];
      const input = (issue as { input?: unknown }).input;
      const options = discriminator === 'transport' ? [...TRANSPORTS] : ((issue as { options?: unknown[] }).options ?? []).map(String);
      const given = isPlainObject(input) ? input[discriminator] : undefined;
      if (given === undefined) {
        const extra = discriminator === 'transport' ? ', or give `command` (stdio) or `url` (streamable-http)' : '';
        return [{ path, message: `required: one of ${options.join(', ')}${extra}` }];
      }
      const hint = typeof given === 'string' ? didYouMean(given, options) : undefined;
      return [{ path, message: `expected one of ${options.join(', ')}; got ${describeValue(given)}${hint ? ` (did you mean "${hint}"?)` : ''}` }];
    }
    default:
      return [{ path, message: issue.message }];
  }
}

function unknownKeyMessage(key: string, parent: Path, input: unknown): string {
  const allowed = allowedKeysAt(parent, input) ?? [];
  const hint = didYouMean(key, allowed);
  if (hint !== undefined) return `unknown key (did you mean "${hint}"?)`;
  // A key valid for another transport is a common mistake worth naming precisely.
  if (parent[0] === 'upstreams' && parent.length === 2 && isPlainObject(input)) {
    const owners = TRANSPORTS.filter((t) => t !== input.transport && upstreamKeys(t).includes(key));
    if (owners.length > 0) return `unknown key for a ${String(input.transport)} upstream (it belongs to ${owners.join('/')} upstreams)`;
  }
  const where = parent.length === 0 ? ' (custom top-level sections must start with "x-")' : '';
  return allowed.length > 0 ? `unknown key; expected one of ${allowed.join(', ')}${where}` : 'unknown key';
}

/** Upstream names in file order (JS objects would put integer-like names first). */
function upstreamOrder(doc: Document, raw: RawConfig): string[] {
  const names = Object.keys(raw.upstreams);
  let node: unknown = doc.get('upstreams', true);
  if (isAlias(node)) node = node.resolve(doc);
  if (!isMap(node)) return names;
  const inFile = node.items.map((p) => keyText(p.key)).filter((k): k is string => k !== undefined && names.includes(k));
  return [...inFile, ...names.filter((n) => !inFile.includes(n))];
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
