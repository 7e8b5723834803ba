// The Redis store's subscription: one connection per store that hears every task change (the scripts publish them on
// one channel) and fans them out to this replica's watchers, and carries the topics of the replica bus (topics.ts).
// Events published while it is down are lost: once it is back, every watcher is told its task's current state.
import { EventEmitter } from 'node:events';
import { closeConnection, isCluster, subscriberConnection, type RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import type { TaskRecord } from '../tasks.js';
import { OwnEvents } from './own-events.js';
import { parseTask } from './task-record.js';

/** Tries per watched task to read its state after the subscription came back (the main connection may lag). */
const RESYNC_TRIES = 5;
const RESYNC_RETRY_MS = 200;

export class TaskEvents {
  private readonly events = new EventEmitter();
  /** When each watched task last changed, as its last event said (so a resync tells only what was missed). */
  private readonly lastEvents = new Map<string, number>();
  private subscriber: RedisClient | undefined;
  private subscribed: Promise<unknown> | undefined;
  /** On a cluster only: writes return once their own event is back (see OwnEvents). */
  readonly ownEvents: OwnEvents | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly hooks: {
      /** A message on a channel other than the task events' (a topic of the replica bus). */
      deliver: (channel: string, payload: string) => void;
      /** Reads a task's summary, for the resync. */
      read: (taskId: string) => Promise<TaskRecord | undefined>;
    },
  ) {
    this.events.setMaxListeners(0);
    this.ownEvents = isCluster(redis) ? new OwnEvents() : undefined;
  }

  watch(taskId: string, listener: (task: TaskRecord) => void): () => void {
    this.connection();
    this.events.on(taskId, listener);
    return () => {
      this.events.off(taskId, listener);
      if (this.events.listenerCount(taskId) === 0) this.lastEvents.delete(taskId);
    };
  }

  /** Resolves once the event subscription is active (a watcher added before then could miss an event). */
  async ready(): Promise<void> {
    this.connection();
    await this.subscribed;
  }

  async close(): Promise<void> {
    this.events.removeAllListeners();
    if (this.subscriber !== undefined) await closeConnection(this.subscriber);
  }

  /** The subscribing connection, set up on first use. */
  connection(): RedisClient {
    if (this.subscriber !== undefined) return this.subscriber;
    const subscriber = subscriberConnection(this.redis);
    this.subscriber = subscriber;
    subscriber.on('error', () => undefined); // reconnects by itself; readiness reports the main connection
    let connected = false;
    subscriber.on('ready', () => {
      if (!connected) {
        connected = true;
        return;
      }
      // Events published while the subscription was down are lost. Once it is back (the PING answers after the
      // re-subscriptions), every watcher gets its task's current state, so nobody waits for an event that passed.
      void subscriber.ping().then(() => this.resync(), () => undefined);
    });
    const onMessage = (channel: string, payload: string): void => {
      if (channel !== this.keys.taskEvents()) {
        this.hooks.deliver(channel, payload);
        return;
      }
      let task: TaskRecord;
      try {
        task = parseTask(JSON.parse(payload) as string[]);
      } catch {
        return;
      }
      if (this.events.listenerCount(task.taskId) > 0) this.lastEvents.set(task.taskId, task.updatedMs);
      this.events.emit(task.taskId, task);
      this.ownEvents?.arrived(payload);
    };
    subscriber.on('message', onMessage);
    subscriber.on('smessage', onMessage); // topics on a cluster (see RedisTopics.subscribe)
    this.subscribed = subscriber.subscribe(this.keys.taskEvents()).catch(() => undefined); // only on close
    return subscriber;
  }

  private async resync(): Promise<void> {
    for (const name of this.events.eventNames()) {
      const taskId = String(name);
      for (let attempt = 0; attempt < RESYNC_TRIES; attempt++) {
        try {
          const task = await this.hooks.read(taskId);
          // Only what changed while the subscription was down: watchers need not hear the same state twice.
          if (task !== undefined && task.updatedMs !== this.lastEvents.get(taskId)) {
            this.lastEvents.set(taskId, task.updatedMs);
            this.events.emit(taskId, task);
          }
          break;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, RESYNC_RETRY_MS)); // the main connection may not be back yet
        }
      }
    }
  }
}
