// Connections made and removed, heard on every replica (issue 41): a callback on one replica wakes the tasks and
// sessions waiting on any other (store.bus), and a disconnect on one makes every other forget what it remembers of
// the pair. Bus delivery is at most once, so a wait also re-reads the store now and then.
import { randomUUID } from 'node:crypto';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { ReplicaBus } from '../store/bus.js';

/** The bus topic (the store scopes it to itself). */
export const CONSENT_TOPIC = 'consent.connections';
/** How many message ids a replica remembers, to hear its own publication once. */
const SEEN_LIMIT = 1_000;

export interface Connected {
  principal: string;
  upstream: string;
  elicitationId?: string;
}

export interface ConnectionSignalsDeps {
  bus: ReplicaBus;
  logger: Logger;
  /** Whether the pair is connected now (a store read). */
  isConnected: (principal: string, upstream: string) => Promise<boolean>;
  /** A pair was disconnected or connected again, here or elsewhere: drop whatever is remembered of it. */
  changed: (principal: string, upstream: string) => void;
  recheckMs: number;
}

export class ConnectionSignals {
  private readonly listeners = new Set<(connected: Connected) => void>();
  private readonly seen = new Set<string>();
  private readonly waits = new Set<() => void>();
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly deps: ConnectionSignalsDeps) {}

  async start(): Promise<void> {
    this.unsubscribe ??= await this.deps.bus.subscribe(CONSENT_TOPIC, (message) => this.receive(message));
  }

  /** Stops listening; waits still pending end as if aborted. */
  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    for (const end of [...this.waits]) end();
  }

  announce(kind: 'connected' | 'removed', connected: Connected): void {
    const message: JsonObject = { id: randomUUID(), kind, principal: connected.principal, upstream: connected.upstream, ...(connected.elicitationId !== undefined && { elicitationId: connected.elicitationId }) };
    this.receive(message);
    this.deps.bus.publish(CONSENT_TOPIC, message).catch((err: unknown) => {
      this.deps.logger.warn({ err, upstream: connected.upstream, kind }, 'could not tell the other replicas of a connection change (they re-read the store)');
    });
  }

  onConnected(listener: (connected: Connected) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  async whenConnected(principal: string, upstream: string, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return false;
    if (await this.deps.isConnected(principal, upstream)) return true;
    return new Promise<boolean>((resolve) => {
      const finish = (connected: boolean): void => {
        if (!this.waits.delete(end)) return;
        clearInterval(timer);
        off();
        signal.removeEventListener('abort', end);
        resolve(connected);
      };
      const end = (): void => finish(false);
      const check = (): void => void this.deps.isConnected(principal, upstream).then((yes) => yes && finish(true), () => undefined);
      this.waits.add(end);
      const timer = setInterval(check, this.deps.recheckMs);
      timer.unref();
      const off = this.onConnected((c) => c.principal === principal && c.upstream === upstream && finish(true));
      signal.addEventListener('abort', end, { once: true });
      // What connected between the first read and the subscription above.
      check();
    });
  }

  private receive(message: JsonObject): void {
    const { id, kind, principal, upstream, elicitationId } = message;
    if (typeof id !== 'string' || typeof principal !== 'string' || typeof upstream !== 'string' || (kind !== 'connected' && kind !== 'removed')) return;
    if (this.seen.has(id)) return;
    this.seen.add(id);
    if (this.seen.size > SEEN_LIMIT) this.seen.delete(this.seen.values().next().value as string);
    this.deps.changed(principal, upstream);
    if (kind !== 'connected') return;
    const connected: Connected = { principal, upstream, ...(typeof elicitationId === 'string' && { elicitationId }) };
    for (const listener of [...this.listeners]) {
      try {
        listener(connected);
      } catch (err) {
        this.deps.logger.error({ err, upstream }, 'a listener of connections failed');
      }
    }
  }
}
