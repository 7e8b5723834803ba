// Who runs what (store.leases): each running task's replica, and each replica's liveness, so that any replica finds
// the tasks of one that died (invariant 4) and takes them over. Redis keeps them in the `{running}` keys
// (redis/leases.ts); the embedded store in its running index (memory/running.ts).

export interface Leases {
  /**
   * Records that tasks run on replica `owner` from now on (created there, taken over, or handed back to it), and
   * that `owner` is alive for `leaseMs` more (store time): claiming is a sign of life, so a replica that dies
   * before its first heartbeat is found like any other. Any number of ids: they go to the store
   * IDS_PER_SCRIPT_CALL at a time, one call after the other (so the whole list is not written atomically).
   */
  assign(taskIds: readonly string[], owner: string, leaseMs: number): Promise<void>;
  /**
   * Reserves the id of a task about to be created for replica `owner`, as assign would (a sign of life too), BEFORE
   * its record is written: a replica that dies between the two leaves an id takeOrphans hands over (the taker finds
   * no record and drops it), never a record nobody leased. False, leaving the id as it is, when a replica (`owner`
   * included) holds the id already: a keyed task being created or run there is never taken from its replica.
   */
  reserve(taskId: string, owner: string, leaseMs: number): Promise<boolean>;
  /**
   * Replica `replica` is alive for `leaseMs` more (store time). One write however many tasks it runs: a replica's
   * tasks live and die with it, so they need no renewal of their own.
   */
  heartbeat(replica: string, leaseMs: number): Promise<void>;
  /**
   * Replica `replica` shuts down and gives up its liveness now (store time): the tasks it still holds are orphans
   * at once, taken by the next takeOrphans of any replica rather than leaseMs after its last heartbeat. A replica
   * the index does not know stays unknown.
   */
  expire(replica: string): Promise<void>;
  /**
   * Drops a task from the running index (it ended, whoever ended it); with `owner`, only while that replica holds
   * it (a reservation given back when its creation did not happen).
   */
  release(taskId: string, owner?: string): Promise<void>;
  /**
   * Takes up to `limit` (at most IDS_PER_SCRIPT_CALL) running tasks of replicas whose liveness ran out (they
   * stopped heartbeating): each such task is handed to exactly one caller across all replicas, with the owner it
   * had, and runs on `taker` from then on (which is alive for `leaseMs` more). A taker that dies before it settled
   * them leaves them with its own tasks, and another replica takes them: nothing taken is lost with the taker. A
   * late heartbeat of the old owner does not take them back.
   */
  takeOrphans(limit: number, taker: string, leaseMs: number): Promise<{ taskId: string; owner: string }[]>;
}
