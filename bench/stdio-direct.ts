// The stdio baseline: this process is the MCP client of a stdio server child and keeps `clients` requests in
// flight over its stdin/stdout (newline-delimited JSON-RPC, unique ids), the same closed loop the HTTP load
// generator runs. Nothing sits between client and server, so it is the ceiling any stdio front can reach.
//   tsx bench/stdio-direct.ts [--clients 50] [--warmup-ms 2000] [--duration-ms 8000] [-- <command> <args...>]
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { PROTOCOL_VERSION } from './load.js';
import {
  checkEchoResult,
  planFromArgs,
  planOptions,
  runPhase,
  runPlan,
  uniqueId,
  type Driver,
  type PhaseSpec,
  type PhaseStats,
} from './stats.js';

export interface StdioDirectOptions {
  command: string;
  args: readonly string[];
  clients: number;
  /** Per-call deadline. */
  timeoutMs?: number;
}

interface Pending {
  resolve: (msg: { result?: unknown; error?: { code: number; message: string } }) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** server-everything's stdio entry point, resolved from this repo's node_modules. */
export function everythingEntry(): string {
  return createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');
}

export class StdioDirect implements Driver {
  private child: ChildProcessWithoutNullStreams | undefined;
  private readonly pending = new Map<number, Pending>();
  private buffer = '';
  private stderrTail = '';

  constructor(private readonly opts: StdioDirectOptions) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  private onLine(line: string): void {
    if (line.trim() === '') return;
    let msg: { id?: unknown; method?: unknown; result?: unknown; error?: { code: number; message: string } };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      return; // a server printing non-JSON to stdout is its bug; the affected call times out and counts as error
    }
    if (typeof msg.method === 'string') {
      // A server→client request: this client declared no capabilities, so decline it rather than leave it hanging.
      if (msg.id !== undefined) {
        this.write({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'not supported by bench client' } });
      }
      return;
    }
    if (typeof msg.id !== 'number') return;
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    clearTimeout(p.timer);
    p.resolve(msg);
  }

  private write(msg: object): void {
    if (!this.child) throw new Error('not started');
    this.child.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  private rpc(method: string, params: object): Promise<unknown> {
    const id = uniqueId();
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method} id ${id}: no response within ${this.opts.timeoutMs ?? 15_000} ms`));
      }, this.opts.timeoutMs ?? 15_000);
      this.pending.set(id, {
        timer,
        reject,
        resolve: (msg) => {
          if (msg.error) reject(new Error(`JSON-RPC error ${msg.error.code}: ${msg.error.message}`));
          else resolve(msg.result);
        },
      });
      this.write({ jsonrpc: '2.0', id, method, params });
    });
  }

  async open(): Promise<void> {
    const child = spawn(this.opts.command, [...this.opts.args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      this.buffer += chunk;
      let nl: number;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        this.onLine(line);
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-2000);
    });
    child.stdin.on('error', () => {}); // reported through 'exit' below
    child.on('exit', (code, signal) => {
      const err = new Error(`stdio server exited (code ${code}, signal ${signal}): ${this.stderrTail.trim()}`);
      for (const [id, p] of this.pending) {
        clearTimeout(p.timer);
        this.pending.delete(id);
        p.reject(err);
      }
      this.child = undefined;
    });
    await this.rpc('initialize', {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'taskgate-bench', version: '0.1.0' },
    });
    this.write({ jsonrpc: '2.0', method: 'notifications/initialized' });
  }

  run(spec: PhaseSpec, clients = this.opts.clients): Promise<PhaseStats> {
    return runPhase(clients, spec, async () => {
      checkEchoResult(await this.rpc('tools/call', { name: 'echo', arguments: { message: 'hi' } }));
    });
  }

  async close(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.stdin.end(); // the SDK's stdio server exits when its input closes
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    child.kill('SIGTERM');
    await exited;
    clearTimeout(timer);
  }
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ options: planOptions, allowPositionals: true });
  const plan = planFromArgs(values);
  const [command, ...args] = positionals.length > 0 ? positionals : [process.execPath, everythingEntry(), 'stdio'];
  if (command === undefined) throw new Error('no command');
  const result = await runPlan(new StdioDirect({ command, args, clients: plan.clients }), plan);
  console.log(JSON.stringify(result, null, 2));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
