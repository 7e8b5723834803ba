// `subscriptions/listen`: the stream a 2026-07-28 client keeps open for notifications that belong to no request
// (list changes, resource updates, and with the Tasks extension `notifications/tasks`).
import type { JsonObject, JsonRpcNotification, RequestId } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import { META_SUBSCRIPTION_ID } from '../../mcp.js';
import { isTerminal, type TaskRecord, type TaskStore } from '../../store/task-store.js';
import type { TaskReader } from '../../principals.js';
import { codec, detailedTask } from './codec.js';
import type { StatelessResponder } from './responder.js';

/** The filter a listener asked for, as far as the gateway honours it. */
export interface ListenFilter {
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
  taskIds?: string[];
}

const LIST_CHANGED: ReadonlyMap<string, keyof ListenFilter> = new Map([
  ['notifications/tools/list_changed', 'toolsListChanged'],
  ['notifications/prompts/list_changed', 'promptsListChanged'],
  ['notifications/resources/list_changed', 'resourcesListChanged'],
]);

interface Listener {
  id: RequestId;
  filter: ListenFilter;
  /** Who listens: other principals' tasks, and tasks of tools it may no longer use, are not its to hear of. */
  reader: TaskReader;
  responder: StatelessResponder;
  stopWatching: (() => void)[];
}

export class ListenHub {
  private readonly listeners = new Set<Listener>();

  constructor(
    private readonly store: TaskStore,
    private readonly logger: Logger,
  ) {}

  /** Resource URIs some listener wants updates for (the router subscribes upstream for them). */
  wantedResources(): Set<string> {
    const uris = new Set<string>();
    for (const listener of this.listeners) for (const uri of listener.filter.resourceSubscriptions ?? []) uris.add(uri);
    return uris;
  }

  /**
   * Starts a listen stream: the acknowledgement (echoing what is honoured) goes first, then matching
   * notifications until the client closes the stream or the gateway shuts down.
   */
  open(id: RequestId, filter: ListenFilter, responder: StatelessResponder, reader: TaskReader): Promise<void> {
    const listener: Listener = { id, filter, reader, responder, stopWatching: [] };
    responder.startStream();
    responder.notify({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { _meta: { [META_SUBSCRIPTION_ID]: id }, notifications: filter as JsonObject },
    });
    this.listeners.add(listener);
    for (const taskId of filter.taskIds ?? []) listener.stopWatching.push(this.watchTask(listener, taskId));
    return new Promise<void>((resolve) => {
      responder.gone.addEventListener('abort', () => {
        this.drop(listener);
        resolve();
      }, { once: true });
    });
  }

  /** Delivers an upstream notification to every listener whose filter wants it. */
  broadcast(message: JsonRpcNotification): void {
    const key = LIST_CHANGED.get(message.method);
    const uri = message.method === 'notifications/resources/updated' ? message.params?.uri : undefined;
    for (const listener of this.listeners) {
      const wanted = key !== undefined ? listener.filter[key] === true : typeof uri === 'string' && (listener.filter.resourceSubscriptions ?? []).includes(uri);
      if (wanted) this.send(listener, message.method, message.params ?? {});
    }
  }

  /** Ends every stream with the listen result (shutdown). */
  close(): void {
    for (const listener of [...this.listeners]) {
      this.drop(listener);
      const result = codec.clientResult('subscriptions/listen', { _meta: { [META_SUBSCRIPTION_ID]: listener.id } });
      listener.responder.finish({ jsonrpc: '2.0', id: listener.id, result }, 200);
    }
  }

  private watchTask(listener: Listener, taskId: string): () => void {
    const push = (task: TaskRecord): void => {
      const { reader } = listener;
      if ((reader.principal !== undefined && task.principal !== reader.principal) || !reader.mayUse(task.tool)) return;
      // Terminal tasks are sent whole (result or error inlined), which the event itself does not carry.
      const full = isTerminal(task.status) ? this.store.tasks.get(taskId, { outcome: true }) : Promise.resolve(task);
      full.then(
        (current) => current !== undefined && this.send(listener, 'notifications/tasks', detailedTask(current)),
        (error: unknown) => this.logger.warn({ task: taskId, err: error }, 'could not read a task for its listeners'),
      );
    };
    return this.store.tasks.watch(taskId, push);
  }

  private send(listener: Listener, method: string, params: JsonObject): void {
    const meta = typeof params._meta === 'object' && params._meta !== null ? (params._meta as JsonObject) : {};
    listener.responder.notify({ jsonrpc: '2.0', method, params: { ...params, _meta: { ...meta, [META_SUBSCRIPTION_ID]: listener.id } } });
  }

  private drop(listener: Listener): void {
    if (!this.listeners.delete(listener)) return;
    for (const stop of listener.stopWatching) stop();
  }
}
