import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { StdioUpstreamConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { encodeMessage, type JsonRpcMessage } from '../jsonrpc.js';
import { LineSplitter } from './line-splitter.js';
import { oversized, RESYNC_FACTOR } from './oversized.js';
import { decodePayload } from './payload.js';
import { holdReadable, receiveDecoded, type UpstreamTransport } from './transport.js';

// Only these variables reach a child unless configured: the gateway's own environment holds secrets
// (Redis URLs, tokens) that an upstream has no business seeing.
const INHERITED_ENV = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'LANG', 'TMPDIR', 'NODE_OPTIONS'];

/** A stderr line is logged with at most this many of its bytes (and its full length). */
export const STDERR_LOGGED_BYTES = 2048;

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

  constructor(
    private readonly config: StdioUpstreamConfig,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    const env: Record<string, string> = {};
    for (const name of INHERITED_ENV) {
      const value = process.env[name];
      if (value !== undefined) env[name] = value;
    }
    Object.assign(env, this.config.env);
    const child = spawn(this.config.command, [...this.config.args], {
      cwd: this.config.cwd,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.on('error', (error) => this.logger.error({ err: error }, 'upstream process error'));
    child.stdin.on('error', (error) => this.logger.debug({ err: error }, 'upstream stdin closed'));
    child.once('exit', (code, signal) => {
      this.exited = true;
      this.onclose?.(this.killedBecause ?? (signal ? `the process was killed by ${signal}` : `the process exited with code ${code}`));
    });
    this.readStdout(child);
    this.readStderr(child);
  }

  async send(message: JsonRpcMessage): Promise<void> {
    const child = this.child;
    if (child === undefined || this.exited || !child.stdin.writable) throw new Error('the process is not running');
    child.stdin.write(`${encodeMessage(message)}\n`);
  }

  /** One stdout carries everything: held back only on a child of one client (the connection decides). */
  hold(_relatedTo: unknown, until: Promise<void>): void {
    holdReadable(this.child?.stdout, until);
  }

  async close(): Promise<void> {
    const child = this.child;
    if (child === undefined || this.exited) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.stdin.end();
    const term = setTimeout(() => child.kill('SIGTERM'), 2000);
    const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(term);
    clearTimeout(kill);
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
        child.kill('SIGKILL');
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
