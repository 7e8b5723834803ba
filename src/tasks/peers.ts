import type { JsonObject } from '../jsonrpc.js';

/** Messages one part sends other replicas, by topic: each body and, for a request, the answer it gets. */
export type PeerMessages<M> = { [T in keyof M]: { body: unknown; answer: unknown } };

/**
 * The other replicas, as a part that declares its own messages `M` needs them. The gateway's ReplicaLink carries
 * every part's messages; each part sees only its own topics.
 */
export interface Peers<M extends PeerMessages<M>> {
  readonly id: string;
  /**
   * Whether a replica of this id is running now, by its subscription to the store (gone the moment its process is:
   * unlike its heartbeat, not late when its event loop is).
   */
  exists?(replicaId: string): Promise<boolean>;
  /** Handles a request another replica sent; `accept` says this replica holds what it is about. */
  on<T extends keyof M & string>(
    type: T,
    handler: (body: M[T]['body'], peer: { accept(): void; emit(event: JsonObject): void }) => Promise<M[T]['answer'] | undefined>,
  ): void;
  /** Tells one replica, or all (`target` undefined), expecting no answer. */
  tell?<T extends keyof M & string>(target: string | undefined, type: T, body: M[T]['body']): Promise<void>;
  /** Asks one replica, or all (`target` undefined); undefined when none took it up in time. */
  ask<T extends keyof M & string>(
    target: string | undefined,
    type: T,
    body: M[T]['body'],
    onEvent?: (event: JsonObject) => void,
    timeoutMs?: number,
  ): Promise<M[T]['answer'] | undefined>;
}
