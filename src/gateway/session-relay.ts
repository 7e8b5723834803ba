// Sessions across replicas. Any replica serves any request of a session, but a client's stream (its
// GET stream, a tasks/result stream, a POST's response stream) is an HTTP response one replica holds. What must
// reach such a stream from elsewhere (task notifications, an upstream's request, the answer to a request, a
// Last-Event-ID resume) goes to the replica holding it, over the store's pub/sub.
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { httpConnection, type SseConnection } from '../streams/sse-connection.js';
import type { JsonObject, Outcome, RequestId } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { TaskStore } from '../store/task-store.js';
import type { ReplicaAnswer, ReplicaBody, ReplicaLink, ReplicaTopic } from './replicas.js';
import { streamIdOf, type ClientSession } from './session.js';
import type { RegistryPeers, SessionRegistry } from './sessions.js';

/** The sessions this replica holds, as the relay reaches them (the registry, which in turn tells peers through the relay). */
export type HeldSessions = Pick<SessionRegistry, 'peek' | 'endHere'>;

/** Session-record field naming the replica that holds the tasks/result stream of a task. */
const resultField = (taskId: string): string => `result:${taskId}`;
const STANDALONE_FIELD = 'standalone';

export interface SessionRelayDeps {
  store: Pick<TaskStore, 'bus' | 'sessions'>;
  /** The typed messages between replicas. */
  link: ReplicaLink;
  /** The sessions this replica holds. */
  sessions: HeldSessions;
  /** How long a session lives unused (sessions.idleTimeoutMs). */
  sessionTtlMs: number;
  logger: Logger;
  /** Stops a call of the session running here that the client cancelled through another replica. */
  cancelHere: (session: ClientSession, params: JsonObject) => boolean;
}

export class SessionRelay implements RegistryPeers {
  /** Streams held here that write to another replica's client connection (remote resumes), by pipe topic. */
  private readonly pipes = new Map<string, { close(): void }>();

  private readonly store: Pick<TaskStore, 'bus' | 'sessions'>;
  private readonly link: ReplicaLink;
  private readonly sessions: HeldSessions;
  private readonly sessionTtlMs: number;
  private readonly logger: Logger;
  private readonly cancelHere: (session: ClientSession, params: JsonObject) => boolean;

  constructor(deps: SessionRelayDeps) {
    ({ store: this.store, link: this.link, sessions: this.sessions, sessionTtlMs: this.sessionTtlMs, logger: this.logger, cancelHere: this.cancelHere } = deps);
    const { link } = deps;
    link.on('session.deliver', async (body) => ({ delivered: this.sessions.peek(body.sessionId)?.deliverHere(body.message, body.taskId) ?? false }));
    link.on('session.answer', async (body) => {
      this.sessions.peek(body.sessionId)?.answer(body.id, body.outcome);
      return undefined;
    });
    link.on('session.cancel', async (body) => {
      const session = this.sessions.peek(body.sessionId);
      if (session !== undefined) this.cancelHere(session, body.params);
      return undefined;
    });
    link.on('session.end', async (body) => {
      this.sessions.endHere(body.sessionId, 'deleted'); // the client deleted it through another replica
      return undefined;
    });
    link.on('session.standalone', async (body) => {
      // The client's GET stream is now on another replica: what this one kept for an old one has no reader.
      this.sessions.peek(body.sessionId)?.dropStandalone();
      return undefined;
    });
    link.on('stream.resume', async (body) => this.attachPipe(body));
    link.on('stream.closed', async (body) => {
      this.pipes.get(body.pipe)?.close();
      return undefined;
    });
  }

  get replicaId(): string {
    return this.link.id;
  }

  async holders(sessionId: string, taskId: string | undefined): Promise<{ standalone?: string; result?: string }> {
    const fields = await this.store.sessions.get(sessionId);
    const holders: { standalone?: string; result?: string } = {};
    const standalone = fields?.[STANDALONE_FIELD];
    const result = taskId === undefined ? undefined : fields?.[resultField(taskId)];
    if (standalone !== undefined) holders.standalone = standalone;
    if (result !== undefined) holders.result = result;
    return holders;
  }

  async send(replicaId: string, sessionId: string, message: JsonObject, taskId: string | undefined): Promise<boolean> {
    const answer = await this.link.ask(replicaId, 'session.deliver', taskId === undefined ? { sessionId, message } : { sessionId, message, taskId });
    return answer?.delivered === true;
  }

  answer(replicaId: string, sessionId: string, id: RequestId, outcome: Outcome): void {
    this.tell(replicaId, 'session.answer', { sessionId, id, outcome });
  }

  hold(sessionId: string, what: { standalone: true } | { taskId: string; held: boolean }): Promise<void> {
    const fields: Record<string, string | null> =
      'standalone' in what ? { [STANDALONE_FIELD]: this.replicaId } : { [resultField(what.taskId)]: what.held ? this.replicaId : null };
    const recorded = this.store.sessions.save(sessionId, fields, this.sessionTtlMs).then(
      () => undefined,
      (error: unknown) => this.logger.warn({ session: sessionId, err: error }, 'could not record where a session stream is held'),
    );
    if ('standalone' in what) this.tell(undefined, 'session.standalone', { sessionId });
    return recorded;
  }

  /** Resolves once Redis has handed the end to every replica's subscription (never rejects: a failure is logged). */
  ended(sessionId: string): Promise<void> {
    return this.tell(undefined, 'session.end', { sessionId });
  }

  /** A client cancelled a request this replica is not running: whichever replica runs it stops it. */
  cancelled(sessionId: string, params: JsonObject): void {
    this.tell(undefined, 'session.cancel', { sessionId, params });
  }

  /**
   * Resumes, on `response`, a stream another replica holds (the event id names it): that replica replays what the
   * client missed and goes on writing through a pipe. False when that replica does not answer or knows no such
   * stream any more (the caller then serves the request itself).
   */
  async resume(sessionId: string, lastEventId: string, response: ServerResponse): Promise<boolean> {
    const streamId = streamIdOf(lastEventId);
    const owner = streamId.includes('_') ? streamId.slice(0, streamId.lastIndexOf('_')) : undefined;
    if (owner === undefined || owner === this.replicaId) return false;
    // The id comes from the client: only a replica that is running now is worth a subscription and a message.
    if (!(await this.link.exists(owner).catch(() => false))) return false;
    const pipe = `pipe.${randomUUID()}`;
    const connection = httpConnection(response);
    const unsubscribe = await this.store.bus.subscribe(pipe, (message) => {
      if (message.kind === 'open') connection.open();
      else if (message.kind === 'data') connection.write(String(message.chunk));
      else if (message.kind === 'end') connection.end();
    });
    const answer = await this.link.ask(owner, 'stream.resume', { sessionId, lastEventId, pipe }).catch(() => undefined);
    if (answer?.attached !== true) {
      unsubscribe();
      return false;
    }
    response.on('close', () => {
      unsubscribe();
      this.tell(owner, 'stream.closed', { pipe });
    });
    return true;
  }

  /** The holder's side of a remote resume: the stream writes into a pipe the resuming replica relays. */
  private async attachPipe({ sessionId, lastEventId, pipe }: ReplicaBody<'stream.resume'>): Promise<ReplicaAnswer<'stream.resume'>> {
    const stream = this.sessions.peek(sessionId)?.streamForEvent(lastEventId);
    if (stream === undefined) return { attached: false };
    let closeListener: (() => void) | undefined;
    const close = (): void => {
      if (!this.pipes.delete(pipe)) return;
      closeListener?.();
    };
    const publish = (message: JsonObject): void => {
      // Nobody listening any more: the resuming replica is gone, so the client is too.
      this.store.bus.publish(pipe, message).then((reached) => reached === 0 && close(), close);
    };
    // Pub/sub says nothing of how far the client is behind: the pipe never asks the stream to wait.
    const connection: SseConnection = {
      open: () => publish({ kind: 'open' }),
      write: (chunk) => {
        publish({ kind: 'data', chunk });
        return true;
      },
      end: () => {
        publish({ kind: 'end' });
        this.pipes.delete(pipe);
      },
      onClose: (listener) => (closeListener = listener),
      onDrain: () => undefined,
      queuedBytes: 0,
    };
    this.pipes.set(pipe, { close });
    stream.attach(connection, { lastEventId });
    return { attached: true };
  }

  private tell<T extends ReplicaTopic>(target: string | undefined, type: T, body: ReplicaBody<T>): Promise<void> {
    return this.link.tell(target, type, body).catch((error: unknown) => this.logger.warn({ err: error, type }, 'could not reach the other replicas'));
  }
}
