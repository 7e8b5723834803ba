// Requests between replicas, over the store's pub/sub: a replica that receives what belongs to a call another
// replica holds (an MRTR retry, a tasks/update answer) hands it to that replica and relays the answer back.
import { randomUUID } from 'node:crypto';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { TaskStore } from '../store/task-store.js';

/**
 * Handles one request from another replica. Resolves with the answer, or `undefined` when this replica does not
 * hold what the request is about (a broadcast reaches every replica; only the holder answers). The holder calls
 * `accept` as soon as it knows it holds it (the sender then waits for the answer however long it takes), and
 * `emit` streams events (notifications) to the sender before the answer.
 */
export type ReplicaHandler = (body: JsonObject, peer: { accept(): void; emit(event: JsonObject): void }) => Promise<JsonObject | undefined>;

/** How long a sender waits for the holder to take a request up (not for its answer). */
const ACCEPT_TIMEOUT_MS = 2000;
const BROADCAST = 'all';

export class ReplicaLink {
  readonly id = randomUUID();
  private readonly handlers = new Map<string, ReplicaHandler>();
  private unsubscribes: (() => void)[] = [];

  constructor(
    private readonly store: TaskStore,
    private readonly logger: Logger,
  ) {}

  on(type: string, handler: ReplicaHandler): void {
    this.handlers.set(type, handler);
  }

  async start(): Promise<void> {
    const receive = (message: JsonObject): void => void this.receive(message);
    this.unsubscribes = await Promise.all([this.store.subscribe(`replica.${this.id}`, receive), this.store.subscribe(`replica.${BROADCAST}`, receive)]);
  }

  close(): void {
    for (const unsubscribe of this.unsubscribes.splice(0)) unsubscribe();
  }

  /**
   * Sends a request to one replica, or to every replica (`target` undefined), and resolves with the answer;
   * undefined when no replica took it up in time (it is gone, or nothing there holds what was asked about).
   */
  async ask(
    target: string | undefined,
    type: string,
    body: JsonObject,
    onEvent: (event: JsonObject) => void = () => undefined,
    acceptTimeoutMs = ACCEPT_TIMEOUT_MS,
  ): Promise<JsonObject | undefined> {
    const replyTo = `reply.${randomUUID()}`;
    let accepted = false;
    let settle!: (answer: JsonObject | undefined) => void;
    const answered = new Promise<JsonObject | undefined>((resolve) => (settle = resolve));
    const unsubscribe = await this.store.subscribe(replyTo, (message) => {
      if (message.kind === 'accepted') accepted = true;
      else if (message.kind === 'event') onEvent(message.event as JsonObject);
      else if (message.kind === 'answer') settle(message.answer as JsonObject | undefined);
    });
    const timer = setTimeout(() => {
      if (!accepted) settle(undefined);
    }, acceptTimeoutMs);
    try {
      const reached = await this.store.publish(`replica.${target ?? BROADCAST}`, { type, replyTo, from: this.id, body });
      // Nobody listens on that replica's topic: it is gone, and no answer can come.
      if (reached === 0) return undefined;
      return await answered;
    } finally {
      clearTimeout(timer);
      unsubscribe();
    }
  }

  /** Whether a replica of this id is running now (replica ids come back from clients: they may name anything). */
  async exists(replicaId: string): Promise<boolean> {
    return (await this.store.subscribers(`replica.${replicaId}`)) > 0;
  }

  /** Sends a message to one replica, or to every other one (`target` undefined), expecting no answer. */
  async tell(target: string | undefined, type: string, body: JsonObject): Promise<void> {
    await this.store.publish(`replica.${target ?? BROADCAST}`, { type, from: this.id, body });
  }

  private async receive(message: JsonObject): Promise<void> {
    if (message.from === this.id) return; // a broadcast reaches its sender too
    const handler = this.handlers.get(String(message.type));
    if (handler === undefined) return;
    const replyTo = message.replyTo;
    if (typeof replyTo !== 'string') {
      // Told, not asked: nobody waits for an answer.
      await handler((message.body ?? {}) as JsonObject, { accept: () => undefined, emit: () => undefined }).catch((error: unknown) => {
        this.logger.warn({ err: error, type: message.type }, 'message from another replica failed');
      });
      return;
    }
    const reply = (payload: JsonObject): void => void this.store.publish(replyTo, payload).catch(() => undefined);
    try {
      const body = (message.body ?? {}) as JsonObject;
      let accepted = false;
      const accept = (): void => {
        if (accepted) return;
        accepted = true;
        reply({ kind: 'accepted' });
      };
      const answer = await handler(body, {
        accept,
        emit: (event) => {
          accept();
          reply({ kind: 'event', event });
        },
      });
      if (answer !== undefined) {
        accept();
        reply({ kind: 'answer', answer });
      }
    } catch (error) {
      this.logger.warn({ err: error, type: message.type }, 'request from another replica failed');
    }
  }
}
