import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { StdioUpstreamConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { encodeMessage, type JsonRpcMessage } from '../jsonrpc.js';
import { holdReadable, receiveDecoded, type UpstreamTransport } from './transport.js';
import { warnViolation } from './violations.js';

// Only these variables reach a child unless configured: the gateway's own environment holds secrets
// (Redis URLs, tokens) that an upstream has no business seeing.
const INHERITED_ENV = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'LANG', 'TMPDIR', 'NODE_OPTIONS'];

/** A child process speaking newline-delimited JSON-RPC on stdin/stdout; its stderr goes to the log. */
export class StdioTransport implements UpstreamTransport {
  onmessage?: UpstreamTransport['onmessage'];
  onclose?: UpstreamTransport['onclose'];
  onrequestlost?: UpstreamTransport['onrequestlost'];

  private child: ChildProcessWithoutNullStreams | undefined;
  private exited = false;

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
      this.onclose?.(signal ? `the process was killed by ${signal}` : `the process exited with code ${code}`);
    });
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => this.receive(line));
    createInterface({ input: child.stderr, crlfDelay: Infinity }).on('line', (line) => {
      if (line.trim() !== '') this.logger.info({ stderr: line }, 'upstream stderr');
    });
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

  private receive(line: string): void {
    if (line.trim() === '') return;
    let decoded: unknown;
    try {
      decoded = JSON.parse(line);
    } catch {
      warnViolation(this.logger, 'a line on stdout that is not JSON', { stdout: line.slice(0, 200) });
      return;
    }
    receiveDecoded(decoded, this, this.logger);
  }
}
