// The dashboard's JSON API (under `<dashboard.path>/api/`), every route behind admin access: all principals' tasks
// newest first with filters and cursors, a task's detail (timeline, outcome preview, pending input requests, the
// identity its upstream sees: task-identity.ts), an operator's cancel, and the upstreams' health. It reads the shared store, so every replica answers the same.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError, retryAfterHeaders, storeUnavailable } from '../errors.js';
import type { UpstreamConfig } from '../config/types.js';
import type { JsonObject, Outcome } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import { InvalidCursorError, isTerminal, TASK_STATUSES, type TaskRecord, type TaskStatus, type TaskStore } from '../store/task-store.js';
import type { TaskRuns } from '../tasks/task-runs.js';
import { ANONYMOUS_PRINCIPAL } from '../principals.js';
import { adminOf } from './admin-access.js';
import { taskUpstreamIdentity } from './task-identity.js';

/** A task page's size unless asked, and at most. */
const DEFAULT_PAGE = 50;
const MAX_PAGE = 200;
/** How much of an outcome the detail shows (characters of its JSON): enough to recognise it, never megabytes. */
export const OUTCOME_PREVIEW_CHARS = 4096;
/** How much of an input request's params the detail shows. */
const REQUEST_PREVIEW_CHARS = 1024;

export interface DashboardApiDeps {
  store: TaskStore;
  tasks: Pick<TaskRuns, 'cancelAsAdmin'>;
  /** The upstreams' status(), as /readyz reports them. */
  upstreams(): JsonObject[];
  /** An upstream's config as the gateway runs it now (after reloads); undefined when none is so named. */
  upstreamConfig(name: string): UpstreamConfig | undefined;
  logger: Logger;
}

/** A refusal with its HTTP status and a message for the page. */
class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Registers the API routes on `app` (a context whose onRequest hook already guards admin access), under `base`. */
export function registerDashboardApi(app: FastifyInstance, base: string, deps: DashboardApiDeps): void {
  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    const status = error instanceof ApiError ? error.status : error instanceof GatewayError ? statusOf(error) : (error.statusCode ?? 500);
    if (status >= 500) request.log.warn({ err: error }, 'dashboard API request failed');
    const retry = error instanceof GatewayError ? retryAfterHeaders(error.data) : {};
    void reply.code(status >= 400 ? status : 500).headers(retry).send({ error: error.message });
  });

  app.get(`${base}tasks`, async (request) => {
    const query = request.query as Record<string, string | undefined>;
    const statuses = query.status === undefined || query.status === '' ? undefined : parseStatuses(query.status);
    const tool = query.tool === undefined || query.tool === '' ? undefined : query.tool;
    const limit = parseLimit(query.limit);
    const cursor = query.cursor === undefined || query.cursor === '' ? undefined : query.cursor;
    try {
      const page = await deps.store.tasks.listAll({ limit, ...(cursor === undefined ? {} : { cursor }), ...(statuses === undefined ? {} : { statuses }), ...(tool === undefined ? {} : { tool }) });
      return { now: Date.now(), tasks: page.tasks.map(taskView), ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }) };
    } catch (error) {
      if (error instanceof InvalidCursorError) throw new ApiError(400, 'Invalid cursor');
      throw unavailable(error);
    }
  });

  app.get(`${base}tasks/:taskId`, async (request) => {
    const { taskId } = request.params as { taskId: string };
    // The kept call is read only for whether it holds a sealed caller (taskUpstreamIdentity); none of it is sent.
    const [task, timeline] = await Promise.all([deps.store.tasks.get(taskId, { outcome: true, call: true }), deps.store.tasks.timeline(taskId)]).catch((error: unknown) => {
      throw unavailable(error);
    });
    if (task === undefined) throw new ApiError(404, 'No such task (unknown or expired)');
    return {
      now: Date.now(),
      task: taskView(task),
      identity: taskUpstreamIdentity(task, deps.upstreamConfig(task.upstream)),
      timeline,
      inputRequests: inputRequestsOf(task),
      ...(task.outcome === undefined ? {} : { outcome: outcomePreview(task.outcome) }),
    };
  });

  app.post(`${base}tasks/:taskId/cancel`, async (request: FastifyRequest, reply: FastifyReply) => {
    const { taskId } = request.params as { taskId: string };
    const task = await deps.store.tasks.get(taskId).catch((error: unknown) => {
      throw unavailable(error);
    });
    if (task === undefined) throw new ApiError(404, 'No such task (unknown or expired)');
    if (task.native === true) throw new ApiError(409, `The task runs on upstream '${task.upstream}' itself; the gateway cannot cancel it`);
    if (isTerminal(task.status)) throw new ApiError(409, `The task is already ${task.status}`);
    const admin = adminOf(request)?.principal ?? ANONYMOUS_PRINCIPAL;
    const cancelled = await deps.tasks.cancelAsAdmin(taskId, admin);
    if (!cancelled.ok) throw new ApiError(409, `The task is already ${cancelled.task?.status ?? 'gone'}`);
    return reply.send({ task: taskView(cancelled.task) });
  });

  app.get(`${base}upstreams`, async () => ({ upstreams: deps.upstreams() }));
}

/** What the page shows of a task: the record without its call, outcome or input requests (counted instead). */
function taskView(task: TaskRecord): JsonObject {
  const view: JsonObject = {
    taskId: task.taskId,
    status: task.status,
    tool: task.tool,
    upstream: task.upstream,
    principal: task.principal,
    era: task.era,
    createdMs: task.createdMs,
    updatedMs: task.updatedMs,
    inputRequests: Object.keys(task.openRequests ?? {}).length,
  };
  if (task.message !== undefined) view.message = task.message;
  if (task.queued === true) view.queued = true;
  if (task.attempt !== undefined) view.attempt = task.attempt;
  if (task.native === true) view.native = true;
  return view;
}

/** The questions the upstream waits on the client to answer: method, what it asks, and a preview of the rest. */
function inputRequestsOf(task: TaskRecord): JsonObject[] {
  return Object.entries(task.openRequests ?? {}).map(([key, value]) => {
    const request = (value ?? {}) as { method?: unknown; params?: { message?: unknown } };
    const entry: JsonObject = { key, method: typeof request.method === 'string' ? request.method : 'unknown' };
    if (typeof request.params?.message === 'string') entry.message = request.params.message;
    entry.params = cut(JSON.stringify(request.params ?? {}, null, 2), REQUEST_PREVIEW_CHARS).text;
    return entry;
  });
}

function outcomePreview(outcome: Outcome): JsonObject {
  const body = 'result' in outcome ? outcome.result : outcome.error;
  const json = JSON.stringify(body, null, 2);
  const { text, truncated } = cut(json, OUTCOME_PREVIEW_CHARS);
  const isError = 'error' in outcome || (outcome.result as { isError?: unknown }).isError === true;
  return { kind: 'result' in outcome ? 'result' : 'error', isError, preview: text, truncated, bytes: Buffer.byteLength(json) };
}

/** The first `max` characters of `text` (never half a surrogate pair), and whether anything was cut. */
function cut(text: string, max: number): { text: string; truncated: boolean } {
  if (text.length <= max) return { text, truncated: false };
  const end = /[\uD800-\uDBFF]/.test(text.charAt(max - 1)) ? max - 1 : max;
  return { text: text.slice(0, end), truncated: true };
}

function parseStatuses(value: string): TaskStatus[] {
  const statuses = value.split(',').map((s) => s.trim());
  const unknown = statuses.filter((s) => !(TASK_STATUSES as readonly string[]).includes(s));
  if (unknown.length > 0) throw new ApiError(400, `Unknown status ${unknown.join(', ')} (expected ${TASK_STATUSES.join(', ')})`);
  return statuses as TaskStatus[];
}

function parseLimit(value: string | undefined): number {
  if (value === undefined || value === '') return DEFAULT_PAGE;
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1) throw new ApiError(400, 'limit must be a positive integer');
  return Math.min(limit, MAX_PAGE);
}

/** The engine's refusals, as an API says them (its registry's statuses are the MCP endpoint's: often 200). */
function statusOf(error: GatewayError): number {
  if (error.code === 'invalid_params') return 404; // find(): the task went between the read and the cancel
  return error.httpStatus >= 400 ? error.httpStatus : 500;
}

/** A store failure: the page says the store is unavailable (503) and keeps polling. */
function unavailable(error: unknown): Error {
  if (error instanceof ApiError || error instanceof GatewayError) return error;
  return storeUnavailable(error); // 503 + Retry-After, in the gateway's words (slow or away), not the Redis client's
}
