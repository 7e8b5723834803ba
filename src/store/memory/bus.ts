// Messages between "replicas" of one process: the embedded store's twin of redis/topics.ts.
import { EventEmitter } from 'node:events';
import type { JsonObject } from '../../jsonrpc.js';
import type { ReplicaBus } from '../bus.js';

export class MemoryBus implements ReplicaBus {
  private readonly topics = new EventEmitter();

  constructor() {
    this.topics.setMaxListeners(0);
  }

  async publish(topic: string, message: JsonObject): Promise<number> {
    const reached = this.topics.listenerCount(topic);
    this.topics.emit(topic, structuredClone(message));
    return reached;
  }

  async subscribers(topic: string): Promise<number> {
    return this.topics.listenerCount(topic);
  }

  async subscribe(topic: string, handler: (message: JsonObject) => void): Promise<() => void> {
    this.topics.on(topic, handler);
    return () => this.topics.off(topic, handler);
  }

  close(): void {
    this.topics.removeAllListeners();
  }
}
