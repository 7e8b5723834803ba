// The Redis store's atomic steps as Lua, one file per transition in ./scripts (BullMQ's layout). Each file opens
// with its KEYS/ARGV contract; a `--! include <snippet>` line pulls in a shared snippet (a file starting with `_`),
// at most once per script. The files are read once, when this module loads.
//
// Scripts run by EVALSHA of their text, and each is registered with ioredis under a name that carries that hash:
// the hash is the version. Replicas of two releases side by side in a rolling deploy each run exactly the scripts
// they were built with; none can call a script of the same name but other text.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RedisClient } from '../redis-connection.js';

/** Every script, with how many of its arguments are keys (the rest are ARGV). */
const KEY_COUNTS = {
  create: 4,
  transition: 3,
  lease: 3,
  reserve: 3,
  heartbeat: 1,
  'expire-replica': 1,
  unlease: 2,
  'take-orphans': 4,
  'record-upstream-session': 3,
  'take-upstream-sessions': 2,
  'save-session': 1,
  'acquire-slot': 5,
  'release-slot': 5,
  'renew-slots': 5,
  'slot-holders': 1,
  'count-hit': 1,
  'stored-bytes': 3,
  delete: 4,
  'decide-approval': 1,
  'reserve-hold': 1,
  'index-hold': 3,
  'unindex-hold': 2,
  'enqueue-delivery': 6,
  'claim-deliveries': 5,
  'ack-delivery': 5,
  'retry-delivery': 5,
  'dead-letter-delivery': 6,
  'put-connection': 2,
  'delete-connection': 2,
  unlock: 1,
} as const;

export type ScriptName = keyof typeof KEY_COUNTS;

const SCRIPTS_DIR = new URL('./scripts/', import.meta.url);
const INCLUDE = /^--! include (\S+)\s*$/;

/** A script's text with its includes resolved (exported for tests and for reading what Redis runs). */
export function scriptSource(name: string, included = new Set<string>()): string {
  const text = readFileSync(new URL(`${name}.lua`, SCRIPTS_DIR), 'utf8');
  return text
    .split('\n')
    .map((line) => {
      const snippet = INCLUDE.exec(line)?.[1];
      if (snippet === undefined) return line;
      if (!snippet.startsWith('_')) throw new Error(`${name}.lua includes ${snippet}: only snippets (files starting with _) can be included`);
      if (included.has(snippet)) return `-- (${snippet} included above)`;
      included.add(snippet);
      return scriptSource(snippet, included).trimEnd();
    })
    .join('\n');
}

const LOADED = Object.fromEntries(
  (Object.keys(KEY_COUNTS) as ScriptName[]).map((name) => {
    const lua = scriptSource(name);
    const version = createHash('sha1').update(lua).digest('hex').slice(0, 12);
    return [name, { lua, command: `taskgate_${name.replace(/-/g, '_')}_${version}` }];
  }),
) as Record<ScriptName, { lua: string; command: string }>;

/** Runs one script: `args` are its KEYS first, then its ARGV, as its file's header says. */
export type RunScript = (name: ScriptName, ...args: string[]) => Promise<unknown>;

/** Registers every script with the client (EVALSHA, loading the text when Redis lacks it) and returns the runner. */
export function defineScripts(redis: RedisClient): RunScript {
  for (const name of Object.keys(KEY_COUNTS) as ScriptName[]) {
    redis.defineCommand(LOADED[name].command, { numberOfKeys: KEY_COUNTS[name], lua: LOADED[name].lua });
  }
  const commands = redis as unknown as Record<string, (...args: string[]) => Promise<unknown>>;
  return (name, ...args) => commands[LOADED[name].command]!(...args);
}
