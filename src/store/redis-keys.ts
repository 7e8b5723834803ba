// Every Redis key and channel name the gateway uses is built here. Per-task keys carry the task id as a hash tag
// (`{id}`), so whatever else a task needs later lands in the same Redis Cluster slot as its record.

export interface RedisKeys {
  task(taskId: string): string;
  /** Marker that outlives the task record, so an expired id can be told from an unknown one. */
  taskExpired(taskId: string): string;
  /** List of a task's status changes (JSON entries, oldest first), beside its record. */
  taskTimeline(taskId: string): string;
  /** Tombstone of a deleted keyed task: its key's id serves no new task while it lasts. */
  taskDeleted(taskId: string): string;
  /** Sorted set (lexical) of a principal's tasks, by listing key. */
  principalTasks(principal: string): string;
  /**
   * Sorted set (lexical) of every task, by listing key, for operators (the dashboard). One key, so on Redis
   * Cluster the whole index lives in one slot (its own hash tag): a listing reads it with one command per batch.
   */
  allTasks(): string;
  /** Pub/sub channel carrying every task change. */
  taskEvents(): string;
  /** HMAC secret for list cursors and MRTR request state, shared by all replicas. */
  signingSecret(): string;
  /**
   * Who runs what, all under the hash tag `{running}` (one Cluster slot, so one Lua script sees it all):
   * replicas by liveness deadline (a sorted set: one write per replica per heartbeat, however many tasks it runs),
   * each running task's replica (a hash), and each replica's running tasks (a set per replica, so a dead replica's
   * tasks are found without looking at anyone else's). `runningOfPrefix` + replica id is that set's key: the
   * sweep script builds the keys of the replicas it finds dead from it (they share the hash tag, so the slot).
   */
  replicasAlive(): string;
  runningOwners(): string;
  runningOf(replica: string): string;
  runningOfPrefix(): string;
  /**
   * Sorted set of running tasks by lease deadline, as releases before replica liveness kept them (a deadline per
   * task, renewed task by task). Read by the sweep during a rolling upgrade; nothing writes it any more.
   */
  runningByLeaseDeadline(): string;
  /**
   * Upstream sessions a replica opened, under the same `{running}` hash tag (a sweep reads them beside the
   * replicas' liveness): a hash per replica (`upstreamSessionsOfPrefix` + replica id) and the set of replicas that
   * have one.
   */
  upstreamSessionsOf(replica: string): string;
  upstreamSessionsOfPrefix(): string;
  upstreamSessionReplicas(): string;
  /** Hash of one session's shared state. */
  session(sessionId: string): string;
  /** Pub/sub channel of replica-to-replica messages on one topic. */
  topic(name: string): string;
  /**
   * A slot semaphore's keys, all under the hash tag `{slot:<key>}` (one Cluster slot, so one Lua script sees them
   * all): holders by lease deadline, the line by arrival sequence, queued tickets' lease deadlines, each ticket's
   * owner, and the sequence counter.
   */
  slot(key: string): SlotKeys;
  /** A rate limit's counter for one principal (hash tag: the principal, like its task index). */
  rateWindow(name: string, principal: string): string;
  /**
   * A ledger of stored result bytes (see StoredLedgerKeys): one per principal under the principal's hash tag, and
   * the store-wide one under its own (`{stored}`). They never share a Cluster slot, so each is its own atomic step.
   */
  storedBytes(principal: string): StoredLedgerKeys;
  allStoredBytes(): StoredLedgerKeys;
  /**
   * Sorted set of the tasks whose call waits for approval, by deadline, under its own hash tag (`{approvals}`):
   * an approver's listing and the expiry sweep read it. Decisions are made on the task's record (its own slot);
   * entries of decided holds are dropped after, and as they are met.
   */
  pendingApprovals(): string;
  /**
   * Hash of each indexed hold's small entry (task id → JSON PendingHold: who asked, tool, approvers, deadline), under
   * the same hash tag: listings filter on it without reading any task's record.
   */
  pendingApprovalEntries(): string;
  /**
   * Sorted set of one principal's pending holds by deadline (what tasks.maxPendingApprovalsPerPrincipal counts),
   * under the same hash tag; `pendingApprovalsOfPrefix` + principal is its key (the unindex script builds it).
   */
  pendingApprovalsOf(principal: string): string;
  pendingApprovalsOfPrefix(): string;
  /** A webhook endpoint's delivery queue (see WebhookQueueKeys), under the hash tag `{webhook:<endpoint>}`. */
  webhookQueue(endpoint: string): WebhookQueueKeys;
  /**
   * A user's connection to an upstream (a hash: its version and its JSON record), under the upstream's hash tag
   * `{connections:<upstream>}` beside the set of principals connected to it (`connectedPrincipals`): the put and
   * delete scripts keep both in one step (one Cluster slot). Upstream names are letters, digits, `_` and `-`.
   */
  connection(principal: string, upstream: string): string;
  connectedPrincipals(upstream: string): string;
  /**
   * Set of the upstreams a principal ever connected to, under the principal's hash tag (like its tasks): what
   * connections.list reads. Another slot than the records, so it is written before each put and never emptied (at
   * most one member per upstream); a member without a record is read as no connection.
   */
  principalConnections(principal: string): string;
  /** A consent link (JSON, expiring by itself), under its id's hash tag. */
  consentLink(id: string): string;
  /** An authorization flow in progress (JSON, expiring by itself), under its state's hash tag. */
  consentFlow(state: string): string;
  /** The gateway's client registration at an issuer for one redirect URI (JSON); both parts URI-encoded, so no two pairs share a key. */
  clientRegistration(issuer: string, redirectUri: string): string;
  /** A named lock (its owner, expiring by itself), under the name's hash tag. */
  lock(name: string): string;
}

/**
 * One webhook endpoint's delivery queue, one Cluster slot: deliveries waiting by due time and leased ones by lease
 * deadline (sorted sets), each delivery's body and its state (hashes), the bytes of the bodies queued (a counter),
 * and its dead letters (a list).
 */
export interface WebhookQueueKeys {
  waiting: string;
  leased: string;
  bodies: string;
  state: string;
  bytes: string;
  dead: string;
}

/** One stored-bytes ledger: task ids by expiry (a sorted set), each task's bytes (a hash), and their sum (a counter). */
export interface StoredLedgerKeys {
  expiries: string;
  sizes: string;
  total: string;
}

/** A ledger's keys in the order the stored-bytes script takes them. */
export function storedLedgerKeyList(keys: StoredLedgerKeys): string[] {
  return [keys.expiries, keys.sizes, keys.total];
}

export interface SlotKeys {
  holders: string;
  queue: string;
  queueDeadlines: string;
  owners: string;
  sequence: string;
}

/** A semaphore's keys in the order the slot scripts take them. */
export function slotKeyList(keys: SlotKeys): string[] {
  return [keys.holders, keys.queue, keys.queueDeadlines, keys.owners, keys.sequence];
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    task: (taskId) => `${prefix}:task:{${taskId}}`,
    taskExpired: (taskId) => `${prefix}:task:{${taskId}}:expired`,
    taskTimeline: (taskId) => `${prefix}:task:{${taskId}}:timeline`,
    taskDeleted: (taskId) => `${prefix}:task:{${taskId}}:deleted`,
    allTasks: () => `${prefix}:{all-tasks}`,
    principalTasks: (principal) => `${prefix}:principal:{${principal}}:tasks`,
    taskEvents: () => `${prefix}:events:tasks`,
    signingSecret: () => `${prefix}:signing-secret`,
    session: (sessionId) => `${prefix}:session:{${sessionId}}`,
    topic: (name) => `${prefix}:replicas:${name}`,
    replicasAlive: () => `${prefix}:{running}:replicas`,
    runningOwners: () => `${prefix}:{running}:owners`,
    runningOf: (replica) => `${prefix}:{running}:of:${replica}`,
    runningOfPrefix: () => `${prefix}:{running}:of:`,
    runningByLeaseDeadline: () => `${prefix}:{running}`,
    upstreamSessionsOf: (replica) => `${prefix}:{running}:upstream-sessions:of:${replica}`,
    upstreamSessionsOfPrefix: () => `${prefix}:{running}:upstream-sessions:of:`,
    upstreamSessionReplicas: () => `${prefix}:{running}:upstream-sessions`,
    rateWindow: (name, principal) => `${prefix}:rate:{${principal}}:${name}`,
    storedBytes: (principal) => ledgerKeys(`${prefix}:principal:{${principal}}:stored`),
    allStoredBytes: () => ledgerKeys(`${prefix}:{stored}`),
    pendingApprovals: () => `${prefix}:{approvals}:pending`,
    pendingApprovalEntries: () => `${prefix}:{approvals}:entries`,
    pendingApprovalsOf: (principal) => `${prefix}:{approvals}:of:${principal}`,
    pendingApprovalsOfPrefix: () => `${prefix}:{approvals}:of:`,
    webhookQueue: (endpoint) => {
      const base = `${prefix}:{webhook:${endpoint}}`;
      return { waiting: `${base}:waiting`, leased: `${base}:leased`, bodies: `${base}:bodies`, state: `${base}:state`, bytes: `${base}:bytes`, dead: `${base}:dead` };
    },
    connection: (principal, upstream) => `${prefix}:{connections:${upstream}}:of:${principal}`,
    connectedPrincipals: (upstream) => `${prefix}:{connections:${upstream}}:principals`,
    principalConnections: (principal) => `${prefix}:principal:{${principal}}:connections`,
    consentLink: (id) => `${prefix}:consent-link:{${id}}`,
    consentFlow: (state) => `${prefix}:consent-flow:{${state}}`,
    clientRegistration: (issuer, redirectUri) => `${prefix}:client-registration:{${encodeURIComponent(issuer)}}:${encodeURIComponent(redirectUri)}`,
    lock: (name) => `${prefix}:lock:{${name}}`,
    slot: (key) => {
      const base = `${prefix}:{slot:${key}}`;
      return { holders: `${base}:holders`, queue: `${base}:queue`, queueDeadlines: `${base}:queue-deadlines`, owners: `${base}:owners`, sequence: `${base}:seq` };
    },
  };
}

function ledgerKeys(base: string): StoredLedgerKeys {
  return { expiries: `${base}:expiries`, sizes: `${base}:sizes`, total: `${base}:total` };
}
