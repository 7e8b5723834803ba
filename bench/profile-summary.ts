// Where a gateway process spent its CPU, from a V8 CPU profile (`npm run bench -- --cpu-prof DIR` writes one per
// gateway process): busy time (the profile's samples minus idle) split by who spent it — garbage collection, V8
// and Node internals, each npm package, each taskgate source file — and the functions with the most self time.
// Self time only: a function's callees count for themselves, so the rows add up to the busy time.
//
//   npx tsx bench/profile-summary.ts DIR/CPU.*.cpuprofile [--top 30] [--calls N]
//
// With --calls (the calls the profiled run served), each row also says µs per call.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Who a frame's time belongs to: a V8 pseudo-frame, Node's own code, an npm package, or a source file. */
export function ownerOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') return functionName === '' ? '(anonymous native)' : `(${functionName.replace(/^\(|\)$/g, '')})`;
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/').slice(0, 2).join('/')}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg !== null) return `npm:${pkg[1]}`;
  const src = /\/(?:src|dist)\/(.+?)\.(?:ts|js)$/.exec(url);
  return src !== null ? `taskgate:${src[1]}` : url;
}

/** Self microseconds per profile node id. */
function selfTimes(profile: CpuProfile): Map<number, number> {
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  return self;
}

export interface ProfileSummary {
  busyUs: number;
  idleUs: number;
  owners: { owner: string; us: number }[];
  functions: { name: string; owner: string; us: number }[];
}

export function summarize(profile: CpuProfile): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const owners = new Map<string, number>();
  const functions = new Map<string, { name: string; owner: string; us: number }>();
  let idleUs = 0;
  let busyUs = 0;
  for (const [id, us] of selfTimes(profile)) {
    const frame = byId.get(id)?.callFrame;
    if (frame === undefined) continue;
    if (frame.url === '' && frame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    busyUs += us;
    const owner = ownerOf(frame);
    owners.set(owner, (owners.get(owner) ?? 0) + us);
    const name = `${frame.functionName || '(anonymous)'} ${frame.url === '' ? '' : `${frame.url.replace(/^.*\/(src|dist|node_modules)\//, '$1/')}:${frame.lineNumber + 1}`}`.trim();
    const entry = functions.get(name) ?? { name, owner, us: 0 };
    entry.us += us;
    functions.set(name, entry);
  }
  const byTime = <T extends { us: number }>(a: T, b: T): number => b.us - a.us;
  return {
    busyUs,
    idleUs,
    owners: [...owners].map(([owner, us]) => ({ owner, us })).sort(byTime),
    functions: [...functions.values()].sort(byTime),
  };
}

function main(): void {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string' }, calls: { type: 'string' } } });
  const top = Number(values.top ?? 25);
  const calls = values.calls === undefined ? undefined : Number(values.calls);
  for (const file of positionals) {
    const summary = summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
    const pct = (us: number): string => `${((100 * us) / summary.busyUs).toFixed(1).padStart(5)} %`;
    const perCall = (us: number): string => (calls === undefined ? '' : ` ${(us / calls).toFixed(1).padStart(6)} µs/call`);
    console.log(`\n${file}\nbusy ${(summary.busyUs / 1e6).toFixed(2)} s, idle ${(summary.idleUs / 1e6).toFixed(2)} s${perCall(summary.busyUs)}`);
    const groups = new Map<string, number>();
    for (const { owner, us } of summary.owners) {
      const group = owner.startsWith('(') ? 'V8 and native (GC, writev, ...)' : owner.slice(0, owner.indexOf(':') + 1) || 'other';
      groups.set(group, (groups.get(group) ?? 0) + us);
    }
    console.log('\nby group:');
    for (const [group, us] of [...groups].sort((a, b) => b[1] - a[1])) console.log(`  ${pct(us)}${perCall(us)}  ${group}`);
    console.log('\nby owner (self time):');
    for (const { owner, us } of summary.owners.slice(0, top)) console.log(`  ${pct(us)}${perCall(us)}  ${owner}`);
    console.log('\nfunctions (self time):');
    for (const { name, us } of summary.functions.slice(0, top)) console.log(`  ${pct(us)}${perCall(us)}  ${name}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main();
