// The scale-out scenario (issue 23; bench/README.md, "The scaleout scenario"): what one gateway replica costs per
// task in flight, whether tasks/list stays flat as a principal's tasks grow, tasks/get across two replicas, and a
// dead replica's tasks with the default lease. Each part runs on a Redis of its own (scaleout-common.ts) and
// reports its figure next to a reference measured in the same run; the targets are reported, never asserted.
import { benchRedis, errorText, type GatewayLaunch, type ScaleoutPart } from './scaleout-common.js';
import { inflightPart, type InflightSettings } from './scaleout-inflight.js';
import { listingPart, type ListingSettings } from './scaleout-listing.js';
import { replicasPart, type ReplicasSettings } from './scaleout-replicas.js';
import { takeoverPart, type TakeoverSettings } from './scaleout-takeover.js';

export type ScaleoutPartName = 'inflight' | 'listing' | 'replicas' | 'takeover';
export const ALL_SCALEOUT_PARTS: readonly ScaleoutPartName[] = ['inflight', 'listing', 'replicas', 'takeover'];

export interface ScaleoutSettings {
  smoke: boolean;
  /** Used only when there is no redis-server binary to start a private one. */
  redisUrl: string;
  parts: ScaleoutPartName[];
  inflight: InflightSettings;
  listing: ListingSettings;
  replicas: ReplicasSettings;
  takeover: TakeoverSettings;
}

export interface ScaleoutCheck {
  scenario: 'scaleout';
  what: string;
  pass: boolean;
  detail: string;
}

export interface ScaleoutRound {
  round: number;
  parts: ScaleoutPart[];
}

/** Every selected part, one after the other; a failing part is recorded and the others still run. */
export async function scaleoutScenario(
  root: string,
  s: ScaleoutSettings,
  gw: GatewayLaunch | string,
  dir: string,
  round: number,
  roundCount: number,
): Promise<ScaleoutRound> {
  const parts: ScaleoutPart[] = [];
  for (const name of s.parts) {
    process.stdout.write(`- ${roundCount > 1 ? `round ${round}, ` : ''}scaleout: ${name} ... `);
    let part: ScaleoutPart = { name, ok: false, lines: [], checks: [], notes: [], data: {} };
    let closeNote: string | undefined;
    try {
      if (typeof gw === 'string') throw new Error(gw);
      const redis = await benchRedis(s.redisUrl, `scaleout-${name}`);
      try {
        const ctx = { root, gw, dir, redis, smoke: s.smoke };
        if (name === 'inflight') part = await inflightPart(ctx, s.inflight);
        else if (name === 'listing') part = await listingPart(ctx, s.listing);
        else if (name === 'replicas') part = await replicasPart(ctx, s.replicas);
        else part = await takeoverPart(ctx, s.takeover);
        part.notes.push(redis.how);
      } finally {
        closeNote = await redis.close();
      }
      console.log(part.lines[0] ?? 'done');
    } catch (err) {
      part.ok = false;
      part.error = errorText(err);
      console.log(`FAILED\n    ${part.error.split('\n').join('\n    ')}`);
    }
    if (closeNote !== undefined) part.notes.push(closeNote);
    parts.push(part);
  }
  return { round, parts };
}

/** The section of the report, and the checks of every part that ran. */
export function reportScaleout(rounds: ScaleoutRound[], gwHow: string): ScaleoutCheck[] {
  console.log(`\n== scaleout: ${gwHow}; the session fixture over stdio behind each gateway ==`);
  const checks: ScaleoutCheck[] = [];
  for (const r of rounds) {
    for (const p of r.parts) {
      const tag = `${rounds.length > 1 ? `round ${r.round}, ` : ''}${p.name}`;
      if (!p.ok) {
        console.log(`  ${tag}: FAILED: ${(p.error ?? '').split('\n')[0]}`);
        continue;
      }
      for (const line of p.lines) console.log(`  ${tag}: ${line}`);
      for (const c of p.checks) checks.push({ scenario: 'scaleout', ...c, what: `${p.name}: ${c.what}` });
    }
  }
  const notes = new Set(rounds.flatMap((r) => r.parts.flatMap((p) => p.notes.map((n) => `${p.name}: ${n}`))));
  for (const n of notes) console.log(`  note: ${n}`);
  return checks;
}
