// /metrics of a gateway run as several worker processes (`taskgate serve --workers N`, src/workers.ts): a scrape
// lands on one worker, chosen round-robin, and must describe the whole group, not that worker. The worker serving it
// asks the primary over the cluster's IPC channel; the primary asks every worker for its registry (as JSON),
// aggregates them with prom-client's AggregatorRegistry and sends the text back. Counters and histograms sum;
// gauges sum too unless their meaning says otherwise (AGGREGATORS). /healthz and /readyz stay per worker.
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Aggregator, type MetricObjectWithValues, type MetricValue, type Registry } from 'prom-client';

const REQUEST = 'taskgate:metrics-request';
const RESPONSE = 'taskgate:metrics-response';
const COLLECT = 'taskgate:metrics-collect';
const COLLECTED = 'taskgate:metrics-collected';

/**
 * A worker that does not answer within this fails the scrape: a gap in the series, rather than totals that seem to
 * drop (a worker left out) and come back.
 */
const COLLECT_TIMEOUT_MS = 5_000;

type MetricJson = MetricObjectWithValues<MetricValue<string>>;

interface Message {
  type?: unknown;
  id?: unknown;
  text?: unknown;
  error?: unknown;
  metrics?: unknown;
}

/**
 * How a metric is combined across workers where summing is wrong. Kept here by name (not on each metric's
 * definition) so that the per-replica metric files stay as they are; prom-client's default metrics carry their own.
 */
function aggregatorOf(name: string): Aggregator | undefined {
  // Up only if up on every worker (the replica is one unit behind the port).
  if (name.endsWith('_up')) return 'min';
  // Ready, and renewing its leases, only if every worker is: a worker that is not still takes its share of requests.
  if (name === 'taskgate_ready' || name === 'taskgate_task_leases_renewing') return 'min';
  // Read from the store, the same on every worker: the soonest is the one.
  if (name === 'taskgate_approval_expiry_seconds') return 'min';
  // Build and version info: one series, whichever worker says it.
  if (name.endsWith('_info')) return 'first';
  // Every replica's view of the same queue in the store, not a share of it.
  if (name === 'taskgate_webhook_queue_depth') return 'max';
  return undefined;
}

// ---- worker side ----

const registries = new Set<Registry>();
const pending = new Map<number, { resolve: (text: string) => void; reject: (err: Error) => void; timer: NodeJS.Timeout }>();
let nextRequest = 0;
let joined = false;

/**
 * Called once in a worker, before its gateway starts: from then on every GatewayMetrics registry of this process
 * is part of the group's /metrics (clusterSource) and answers the primary's collection.
 */
export function joinClusterMetrics(): void {
  if (joined || !cluster.isWorker) return;
  joined = true;
  process.on('message', (raw: unknown) => {
    const message = (raw ?? {}) as Message;
    if (message.type === COLLECT) {
      void Promise.all([...registries].map((r) => r.getMetricsAsJSON())).then(
        (metrics) => process.send?.({ type: COLLECTED, id: message.id, metrics: metrics.flat() }),
        (err: unknown) => process.send?.({ type: COLLECTED, id: message.id, error: err instanceof Error ? err.message : String(err) }),
      );
    } else if (message.type === RESPONSE && typeof message.id === 'number') {
      const waiting = pending.get(message.id);
      if (waiting === undefined) return;
      pending.delete(message.id);
      clearTimeout(waiting.timer);
      if (typeof message.text === 'string') waiting.resolve(message.text);
      else waiting.reject(new Error(`cluster metrics: ${String(message.error)}`));
    }
  });
}

/**
 * What /metrics serves for `registry`: the group's metrics when this process joined (a worker), else undefined
 * (the registry's own). `release` leaves the group (the gateway closed).
 */
export function clusterSource(registry: Registry): { render(): Promise<string>; release(): void } | undefined {
  if (!joined) return undefined;
  registries.add(registry);
  return { render: askPrimary, release: () => registries.delete(registry) };
}

function askPrimary(): Promise<string> {
  const id = nextRequest++;
  return new Promise((resolve, reject) => {
    // The primary bounds its own collection; this only guards against a primary that is gone.
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error('cluster metrics: the primary did not answer'));
    }, COLLECT_TIMEOUT_MS * 2);
    pending.set(id, { resolve, reject, timer });
    process.send?.({ type: REQUEST, id });
  });
}

// ---- primary side ----

interface Collection {
  waiting: Set<number>;
  metrics: MetricJson[][];
  answer: (result: { text: string } | { error: string }) => void;
  timer: NodeJS.Timeout;
}

/**
 * Serves the workers' requests for the group's metrics, in the primary. `own`: the primary's registry (how many
 * workers run, restarts), aggregated with theirs.
 */
export function serveClusterMetrics(own: Registry): void {
  const collections = new Map<number, Collection>();
  let nextCollection = 0;

  const finish = (id: number, collection: Collection): void => {
    collections.delete(id);
    clearTimeout(collection.timer);
    own
      .getMetricsAsJSON()
      .then((mine) => aggregate([...collection.metrics, mine as MetricJson[]]))
      .then(
        (text) => collection.answer({ text }),
        (err: unknown) => collection.answer({ error: err instanceof Error ? err.message : String(err) }),
      );
  };

  const start = (requester: Worker, requestId: unknown): void => {
    const id = nextCollection++;
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
    const collection: Collection = {
      waiting: new Set(workers.map((w) => w.id)),
      metrics: [],
      answer: (result) => {
        if (requester.isConnected()) requester.send({ type: RESPONSE, id: requestId, ...result });
      },
      timer: setTimeout(() => {
        collections.delete(id);
        collection.answer({ error: `workers ${[...collection.waiting].join(', ')} did not answer within ${COLLECT_TIMEOUT_MS} ms` });
      }, COLLECT_TIMEOUT_MS),
    };
    collections.set(id, collection);
    for (const w of workers) w.send({ type: COLLECT, id });
  };

  cluster.on('message', (worker: Worker, raw: unknown) => {
    const message = (raw ?? {}) as Message;
    if (message.type === REQUEST) return start(worker, message.id);
    if (message.type !== COLLECTED || typeof message.id !== 'number') return;
    const collection = collections.get(message.id);
    if (collection === undefined || !collection.waiting.delete(worker.id)) return;
    if (typeof message.error === 'string') {
      // A worker left out would read as totals that drop: the scrape fails instead.
      collections.delete(message.id);
      clearTimeout(collection.timer);
      return collection.answer({ error: `worker ${worker.id}: ${message.error}` });
    }
    if (Array.isArray(message.metrics)) collection.metrics.push(message.metrics as MetricJson[]);
    if (collection.waiting.size === 0) finish(message.id, collection);
  });
  // A worker that exits while asked has nothing more to say (its counters went with it).
  cluster.on('exit', (worker: Worker) => {
    for (const [id, collection] of collections) {
      if (collection.waiting.delete(worker.id) && collection.waiting.size === 0) finish(id, collection);
    }
  });
}

/** The group's Prometheus text from each process's registry JSON. */
export function aggregate(perProcess: MetricJson[][]): Promise<string> {
  for (const metrics of perProcess) {
    for (const metric of metrics) {
      const aggregator = aggregatorOf(metric.name);
      if (aggregator !== undefined) metric.aggregator = aggregator;
    }
  }
  return AggregatorRegistry.aggregate(perProcess).metrics();
}
