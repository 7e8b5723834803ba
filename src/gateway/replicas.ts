// Requests between replicas, over the store's pub/sub: a replica that receives what belongs to a call another
// replica holds (an MRTR retry, a tasks/update answer) hands it to that replica and relays the answer back.
import { randomUUID } from 'node:crypto';
import type { JsonObject, Outcome, RequestId } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { TaskStore } from '../store/task-store.js';
import type { StatelessPeerMessages } from '../protocol/revision-ports.js';
import type { TaskPeerMessages } from '../tasks/task-peer-messages.js';

/**
 * Every message one replica sends another, by topic: its body and, for a request, the answer it gets (`never`
 * for messages that are told, not asked). Bodies travel as JSON between replicas of one release.
 */
export interface ReplicaMessages extends TaskPeerMessages, StatelessPeerMessages {
  /** Put a message on a stream of the session held there (its GET stream, or a task's tasks/result stream). */
  'session.deliver': { body: { sessionId: string; message: JsonObject; taskId?: string }; answer: { delivered: boolean } };
  /** The client's answer to a request the session sent from there. */
  'session.answer': { body: { sessionId: string; id: RequestId; outcome: Outcome }; answer: never };
  /** The client cancelled a request running there. */
  'session.cancel': { body: { sessionId: string; params: JsonObject }; answer: never };
  'session.end': { body: { sessionId: string }; answer: never };
  /** The session's GET stream is now held by the sender: streams kept for an older one have no reader. */
  'session.standalone': { body: { sessionId: string }; answer: never };
  /** Resume (Last-Event-ID) a stream held there, writing into `pipe`. */
  'stream.resume': { body: { sessionId: string; lastEventId: string; pipe: string }; answer: { attached: boolean } };
  'stream.closed': { body: { pipe: string }; answer: never };
}

export type ReplicaTopic = keyof ReplicaMessages;
export type ReplicaBody<T extends ReplicaTopic> = ReplicaMessages[T]['body'];
export type ReplicaAnswer<T extends ReplicaTopic> = ReplicaMessages[T]['answer'];
/** One message as it travels: the union of every topic with its body. */
export type ReplicaMessage = { [T in ReplicaTopic]: { type: T; body: ReplicaBody<T> } }[ReplicaTopic];

/**
 * Handles one request from another replica. Resolves with the answer, or `undefined` when this replica does not
 * hold what the request is about (a broadcast reaches every replica; only the holder answers). The holder calls
 * `accept` as soon as it knows it holds it (the sender then waits for the answer however long it takes), and
 * `emit` streams events (notifications) to the sender before the answer.
 */
export type ReplicaHandler<T extends ReplicaTopic = ReplicaTopic> = (
  body: ReplicaBody<T>,
  peer: { accept(): void; emit(event: JsonObject): void },
) => Promise<ReplicaAnswer<T> | undefined>;

/** How long a sender waits for the holder to take a request up (not for its answer). */
const ACCEPT_TIMEOUT_MS = 2000;
const BROADCAST = 'all';

export class ReplicaLink {
  readonly id = randomUUID();
  private readonly handlers = new Map<ReplicaTopic, ReplicaHandler<never>>();
  private unsubscribes: (() => void)[] = [];
  private closed = false;

  constructor(
    private readonly store: Pick<TaskStore, 'bus'>,
    private readonly logger: Logger,
  ) {}

  on<T extends ReplicaTopic>(type: T, handler: ReplicaHandler<T>): void {
    this.handlers.set(type, handler as unknown as ReplicaHandler<never>);
  }

  async start(): Promise<void> {
    this.closed = false;
    const receive = (message: JsonObject): void => void this.receive(message);
    const unsubscribes = await Promise.all([this.store.bus.subscribe(`replica.${this.id}`, receive), this.store.bus.subscribe(`replica.${BROADCAST}`, receive)]);
    this.unsubscribes.push(...unsubscribes);
    // The gateway does not wait for a store that is down at start: closed before the subscriptions came, it ends them.
    if (this.closed) this.close();
  }

  close(): void {
    this.closed = true;
    for (const unsubscribe of this.unsubscribes.splice(0)) unsubscribe();
  }

  /**
   * Sends a request to one replica, or to every replica (`target` undefined), and resolves with the answer;
   * undefined when no replica took it up in time (it is gone, or nothing there holds what was asked about).
   */
  async ask<T extends ReplicaTopic>(
    target: string | undefined,
    type: T,
    body: ReplicaBody<T>,
    onEvent: (event: JsonObject) => void = () => undefined,
    acceptTimeoutMs = ACCEPT_TIMEOUT_MS,
  ): Promise<ReplicaAnswer<T> | undefined> {
    const replyTo = `reply.${randomUUID()}`;
    let accepted = false;
    let settle!: (answer: ReplicaAnswer<T> | undefined) => void;
    const answered = new Promise<ReplicaAnswer<T> | undefined>((resolve) => (settle = resolve));
    const unsubscribe = await this.store.bus.subscribe(replyTo, (message) => {
      if (message.kind === 'accepted') accepted = true;
      else if (message.kind === 'event') onEvent(message.event as JsonObject);
      else if (message.kind === 'answer') settle(message.answer as ReplicaAnswer<T> | undefined);
    });
    const timer = setTimeout(() => {
      if (!accepted) settle(undefined);
    }, acceptTimeoutMs);
    try {
      const reached = await this.store.bus.publish(`replica.${target ?? BROADCAST}`, { type, replyTo, from: this.id, body: body as JsonObject });
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
    return (await this.store.bus.subscribers(`replica.${replicaId}`)) > 0;
  }

  /** Sends a message to one replica, or to every other one (`target` undefined), expecting no answer. */
  async tell<T extends ReplicaTopic>(target: string | undefined, type: T, body: ReplicaBody<T>): Promise<void> {
    await this.store.bus.publish(`replica.${target ?? BROADCAST}`, { type, from: this.id, body: body as JsonObject });
  }

  private async receive(message: JsonObject): Promise<void> {
    if (message.from === this.id) return; // a broadcast reaches its sender too
    // Sent by a replica of this release (ask/tell type what goes out), so the topic names the body's shape.
    const { type, body = {} } = message as unknown as Partial<ReplicaMessage>;
    const handler = type === undefined ? undefined : (this.handlers.get(type) as unknown as ReplicaHandler | undefined);
    if (handler === undefined) return;
    const replyTo = message.replyTo;
    if (typeof replyTo !== 'string') {
      // Told, not asked: nobody waits for an answer.
      await handler(body as ReplicaBody<ReplicaTopic>, { accept: () => undefined, emit: () => undefined }).catch((error: unknown) => {
        this.logger.warn({ err: error, type }, 'message from another replica failed');
      });
      return;
    }
    const reply = (payload: JsonObject): void => void this.store.bus.publish(replyTo, payload).catch(() => undefined);
    try {
      let accepted = false;
      const accept = (): void => {
        if (accepted) return;
        accepted = true;
        reply({ kind: 'accepted' });
      };
      const answer = await handler(body as ReplicaBody<ReplicaTopic>, {
        accept,
        emit: (event) => {
          accept();
          reply({ kind: 'event', event });
        },
      });
      if (answer !== undefined) {
        accept();
        reply({ kind: 'answer', answer: answer as JsonObject });
      }
    } catch (error) {
      this.logger.warn({ err: error, type }, 'request from another replica failed');
    }
  }
}
