// Replica-to-replica messages on named topics, over Redis pub/sub. On a Redis Cluster a topic is also a shard
// channel: its subscribers all sit on the node that owns its slot, so SPUBLISH reports how many it reached and
// SHARDNUMSUB counts them (PUBLISH and NUMSUB see one node's). Messages the scripts publish (`slots`) stay plain
// PUBLISH, which a cluster carries to every node: a script may publish only to a shard channel of its own slot.
import { EventEmitter } from 'node:events';
import type { JsonObject } from '../../jsonrpc.js';
import { isCluster, type RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import type { ReplicaBus } from '../bus.js';

export class RedisTopics implements ReplicaBus {
  /** Handlers by channel. */
  private readonly handlers = new EventEmitter();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** The store's subscribing connection (set up on first use). */
    private readonly subscriber: () => RedisClient,
  ) {
    this.handlers.setMaxListeners(0);
  }

  /** A message the subscription received on a channel other than the task events'. */
  deliver(channel: string, payload: string): void {
    try {
      this.handlers.emit(channel, JSON.parse(payload) as JsonObject);
    } catch {
      // not JSON: not ours
    }
  }

  close(): void {
    this.handlers.removeAllListeners();
  }

  async publish(topic: string, message: JsonObject): Promise<number> {
    // On a cluster PUBLISH counts only the receivers on the node it went to; SPUBLISH counts them all (subscribe).
    if (isCluster(this.redis)) return Number(await this.redis.spublish(this.keys.topic(topic), JSON.stringify(message)));
    return this.redis.publish(this.keys.topic(topic), JSON.stringify(message));
  }

  async subscribers(topic: string): Promise<number> {
    const channel = this.keys.topic(topic);
    const sharded = isCluster(this.redis);
    const count = async (node: RedisClient): Promise<number> => Number(((await (sharded ? node.pubsub('SHARDNUMSUB', channel) : node.pubsub('NUMSUB', channel))) as [string, number | string])[1] ?? 0);
    // A topic's shard subscribers sit on the node that owns its slot; the other nodes count none.
    if (sharded) {
      // Until its first answer the client may not know every node yet (the PING waits for the slot map).
      if (this.redis.status !== 'ready') await this.redis.ping();
      return (await Promise.all(this.redis.nodes('master').map(count))).reduce((a, b) => a + b, 0);
    }
    return count(this.redis);
  }

  async subscribe(topic: string, handler: (message: JsonObject) => void): Promise<() => void> {
    const channel = this.keys.topic(topic);
    const subscriber = this.subscriber();
    const sharded = isCluster(subscriber);
    // On a cluster both: the shard channel for what replicas send, the plain one for what the scripts send.
    if (this.handlers.listenerCount(channel) === 0) await Promise.all([subscriber.subscribe(channel), sharded ? subscriber.ssubscribe(channel) : undefined]);
    this.handlers.on(channel, handler);
    return () => {
      this.handlers.off(channel, handler);
      if (this.handlers.listenerCount(channel) > 0) return;
      void subscriber.unsubscribe(channel).catch(() => undefined);
      if (sharded) void subscriber.sunsubscribe(channel).catch(() => undefined);
    };
  }
}
