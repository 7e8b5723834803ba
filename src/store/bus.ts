// Messages between replicas (store.bus): what one replica must hand to another that holds a running call, on topics
// the store scopes to itself. The Redis store carries them over pub/sub (redis/topics.ts); the embedded one within
// the process (memory/bus.ts).
import type { JsonObject } from '../jsonrpc.js';

export interface ReplicaBus {
  /**
   * Sends `message` on `topic`. Delivery is at most once; senders wait for a reply with a deadline. Resolves with how
   * many subscribers (replicas) it reached.
   */
  publish(topic: string, message: JsonObject): Promise<number>;
  /** How many subscribers (replicas) listen on `topic` now: whether a replica named in a message is alive. */
  subscribers(topic: string): Promise<number>;
  /** Resolves once the subscription is active, with the function that ends it. */
  subscribe(topic: string, handler: (message: JsonObject) => void): Promise<() => void>;
}
