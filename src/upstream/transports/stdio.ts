import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { StdioUpstreamConfig } from '../../config/types.js';
import type { Logger } from '../../log.js';
import { encodeMessage, type JsonRpcMessage } from '../../jsonrpc.js';
import { LineSplitter } from './line-splitter.js';
import { oversized, RESYNC_FACTOR } from './oversized.js';
import { decodePayload } from './payload.js';
import { holdReadable, receiveDecoded, type UpstreamTransport } from './transport.js';

// Only these variables reach a child unless configured: the gateway's own environment holds secrets
// (Redis URLs, tokens) that an upstream has no business seeing.
const INHERITED_ENV = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'LANG', 'TMPDIR', 'NODE_OPTIONS'];

/** A stderr line is logged with at most this many of its bytes (and its full length). */
export const STDERR_LOGGED_BYTES = 2048;

/** How often a stopping child's process group is checked for members left once its leader exited. */
const GROUP_CHECK_MS = 25;
/**
 * How long after SIGKILL the group may still answer before the gateway stops waiting: a killed process that nobody
 * reaps (a container without an init) stays a zombie of the group, dead but listed.
 */
const REAP_WAIT_MS = 1_000;

/**
 * Process groups of children still running, killed outright if the gateway exits without stopping them (a
 * second signal, the shutdown deadline, a fatal error): in a group of their own, nothing else would reach them.
 */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function trackGroup(pid: number): void {
  liveGroups.add(pid);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const group of liveGroups) signalGroup(group, 'SIGKILL');
  });
}

/** Signals every process of the group; false when none is left. */
function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  if (pid <= 0) return false; // -0 would be the gateway's own group
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** A child process speaking newline-delimited JSON-RPC on stdin/stdout; its stderr goes to the log. */
export class StdioTransport implements UpstreamTransport {
  onmessage?: UpstreamTransport['onmessage'];
  onclose?: UpstreamTransport['onclose'];
  onrequestlost?: UpstreamTransport['onrequestlost'];
  onoversized?: UpstreamTransport['onoversized'];

  private child: ChildProcessWithoutNullStreams | undefined;
  private exited = false;
  /** Why the gateway ended the child itself, if it did: what the calls on it are told instead of the exit signal. */
  private killedBecause: string | undefined;
  /** The group being stopped, once it is: resolves when no process of it is left. */
  private stopping: Promise<void> | undefined;

  /** close() came before the child was spawned (its env was still being made): it is never spawned. */
  private closedBeforeSpawn = false;
  /** Set while writes to stdin are corked until the event loop's check phase (send). */
  private corked = false;

  constructor(
    private readonly config: StdioUpstreamConfig,
    private readonly logger: Logger,
    /** The configured env as this child gets it (a per-principal child's, its caller filled in); absent: as configured. */
    private readonly envFor?: () => Promise<Readonly<Record<string, string>>>,
  ) {}

  async start(): Promise<void> {
    const env: Record<string, string> = {};
    for (const name of INHERITED_ENV) {
      const value = process.env[name];
      if (value !== undefined) env[name] = value;
    }
    Object.assign(env, this.envFor === undefined ? this.config.env : await this.envFor());
    if (this.closedBeforeSpawn) throw new Error('the gateway closed the connection before the process started');
    // A group of its own: what the child starts itself (a shell's, npx's or uv's children) is stopped with it, and
    // a signal meant for the gateway (a terminal's Ctrl-C) reaches the child only through the gateway.
    const child = spawn(this.config.command, [...this.config.args], {
      cwd: this.config.cwd,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
      detached: true,
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    if (child.pid !== undefined) trackGroup(child.pid);
    child.on('error', (error) => this.logger.error({ err: error }, 'upstream process error'));
    child.stdin.on('error', (error) => this.logger.debug({ err: error }, 'upstream stdin closed'));
    child.once('exit', (code, signal) => {
      this.exited = true;
      // What it started may outlive it (orphans the restart would never reach): the rest of its group goes too.
      if (child.pid !== undefined) this.stopping ??= this.stopGroup(child, child.pid);
      this.onclose?.(this.killedBecause ?? (signal ? `the process was killed by ${signal}` : `the process exited with code ${code}`));
    });
    this.readStdout(child);
    this.readStderr(child);
  }

  async send(message: JsonRpcMessage): Promise<void> {
    const child = this.child;
    if (child === undefined || this.exited || !child.stdin.writable) throw new Error('the process is not running');
    // Every message sent in one turn of the event loop (the calls of many clients, each parsed in its own I/O
    // callback) goes out in one write: under load a write per message was the stdio path's largest cost, each a
    // system call that also wakes the child.
    if (!this.corked) {
      this.corked = true;
      child.stdin.cork();
      setImmediate(() => {
        this.corked = false;
        child.stdin.uncork();
      });
    }
    child.stdin.write(`${encodeMessage(message)}\n`);
  }

  /** One stdout carries everything: held back only on a child of one client (the connection decides). */
  hold(_relatedTo: unknown, until: Promise<void>): void {
    holdReadable(this.child?.stdout, until);
  }

  /**
   * Stops the child's whole process group, whatever it is doing (starting, serving, hung, ignoring signals): stdin
   * closed and SIGTERM at once, SIGKILL after stopGraceMs to whatever of the group is left. Resolves once no
   * process of the group remains.
   */
  async close(): Promise<void> {
    const child = this.child;
    const pid = child?.pid;
    this.closedBeforeSpawn = child === undefined;
    if (child === undefined || pid === undefined) return;
    const stopping = (this.stopping ??= this.stopGroup(child, pid));
    await stopping;
  }

  private async stopGroup(child: ChildProcessWithoutNullStreams, pid: number): Promise<void> {
    const exited = this.exited ? Promise.resolve() : new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.stdin.end();
    signalGroup(pid, 'SIGTERM');
    let killed = false;
    const kill = (): void => {
      killed = true;
      signalGroup(pid, 'SIGKILL');
    };
    const timer = setTimeout(kill, this.config.stopGraceMs);
    try {
      await exited;
      // The leader is gone; members of its group it started may not be (they are not our children: no exit event).
      let killedFor = 0;
      while (signalGroup(pid, 0) && killedFor < REAP_WAIT_MS) {
        await new Promise((resolve) => setTimeout(resolve, GROUP_CHECK_MS));
        if (!killed) continue;
        signalGroup(pid, 'SIGKILL');
        killedFor += GROUP_CHECK_MS;
      }
    } finally {
      clearTimeout(timer);
      liveGroups.delete(pid);
    }
  }

  /**
   * One JSON-RPC message per line, each at most maxMessageBytes. A longer line is dropped as it streams and its
   * call (named by the line's head) fails at once; the rest of the line is skipped, and the next line is the next
   * message, since JSON text never holds a raw line break. Only a line that goes on past RESYNC_FACTOR times the
   * limit (one that may never end) costs the child its life: it is killed, its calls fail, and the upstream
   * restarts it with its usual backoff.
   */
  private readStdout(child: ChildProcessWithoutNullStreams): void {
    const limit = this.config.maxMessageBytes;
    const lines = new LineSplitter(
      { maxLineBytes: () => limit, crEndsLine: false },
      {
        line: (line) => this.receive(line),
        overflow: (head) => this.onoversized?.(oversized(limit, head)),
        overflowEnded: (bytes) => this.logger.info({ bytes }, 'skipped an upstream stdout line larger than maxMessageBytes to its end'),
      },
    );
    child.stdout.on('data', (chunk: Buffer) => {
      lines.push(chunk);
      if (lines.overflowBytes > RESYNC_FACTOR * limit && this.killedBecause === undefined) {
        lines.stop();
        this.killedBecause = `it wrote a stdout line of more than ${RESYNC_FACTOR * limit} bytes (${RESYNC_FACTOR} × maxMessageBytes) without ending it; the process is restarted`;
        this.logger.warn({ maxMessageBytes: limit }, 'upstream stdout line does not end; killing the process');
        if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL');
      }
    });
    child.stdout.once('end', () => lines.end());
  }

  /**
   * stderr goes to the log line by line, each cut to STDERR_LOGGED_BYTES (with its full length): a long line is
   * never held whole, its rest is counted as it streams. A line still going past maxMessageBytes is warned about
   * then, so that one that never ends does not go unseen.
   */
  private readStderr(child: ChildProcessWithoutNullStreams): void {
    let cut = '';
    let warned = false;
    const lines = new LineSplitter(
      { maxLineBytes: () => STDERR_LOGGED_BYTES, crEndsLine: true, headChars: STDERR_LOGGED_BYTES },
      {
        line: (line) => {
          if (line.trim() !== '') this.logger.info({ stderr: line }, 'upstream stderr');
        },
        overflow: (head) => {
          cut = head;
          warned = false;
        },
        overflowEnded: (bytes) => this.logger.info({ stderr: cut, bytes, truncated: true }, 'upstream stderr'),
      },
    );
    child.stderr.on('data', (chunk: Buffer) => {
      lines.push(chunk);
      if (!warned && lines.overflowBytes > this.config.maxMessageBytes) {
        warned = true;
        this.logger.warn({ stderr: cut, bytesSoFar: lines.overflowBytes, maxMessageBytes: this.config.maxMessageBytes }, 'upstream stderr line longer than maxMessageBytes (still going; its rest is counted, not kept)');
      }
    });
    child.stderr.once('end', () => lines.end());
  }

  private receive(text: string): void {
    // One message a line, as the transport says; decoded like every other upstream payload (a BOM, several values).
    for (const item of decodePayload(text, this.logger, 'a line on stdout that is not JSON')) receiveDecoded(item, this, this.logger);
  }
}
