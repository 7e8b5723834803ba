// What this revision sends between replicas: a port the gateway implements (gateway/replicas.ts carries these
// messages), so it may be imported from outside this folder, as rev2025-11-25/session.ts is.
import type { JsonObject, Outcome } from '../../jsonrpc.js';
import type { Peers } from '../../tasks/peers.js';
import type { Caller } from '../../principals.js';

export interface StatelessPeerMessages {
  /** A retry (its answers) for a call parked on the replica its request state names. */
  'mrtr.resume': {
    body: {
      x: string;
      /** The retry's answers, keyed by input key. */
      answers: JsonObject;
      method: string;
      name: string;
      taskAfterMs: number | null;
      /** A plain call under `plainCalls: background`: past taskAfterMs it is answered with the task tools' handle. */
      background: boolean;
      logLevel: string | null;
      progressToken: unknown;
      /** The retrying caller, when the gateway authenticates (only the call's own principal resumes it). */
      caller: Caller | null;
    };
    answer: { outcome: Outcome };
  };
}

/** The other replicas, as a retry for a call parked elsewhere needs them (the gateway's ReplicaLink). */
export type StatelessPeers = Peers<StatelessPeerMessages>;
