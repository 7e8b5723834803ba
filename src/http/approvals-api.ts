// The approvers' HTTP API: `GET /approvals` lists the held calls the caller may decide (task, tool, upstream, the
// arguments exactly as the upstream will get them, their digest, who asked, age, deadline), a page at a time,
// soonest deadline first (`?limit=`, `?cursor=` the previous page's `nextCursor`; 429 + Retry-After past the
// listings served at once), and `POST /approvals/{taskId}` with `{"decision": "approve" | "deny", "comment"?,
// "digest"?}` decides one (200 with the decided record; 400 a bad body or a comment past MAX_COMMENT_CHARS; 403 not
// an approver of that tool, or the caller's own call; 404 unknown; 409 decided already, ended, past its deadline, or
// `digest` is not the call's any more: the call changed since it was listed, and the body shows it as it stands).
// Refusals carry a `reason`. The caller
// authenticates as on the MCP endpoint (same Authenticator); a decision must be a request no page on another
// origin could have sent (admin-writes.ts). It reads and decides in the shared store: every replica answers alike.
// The dashboard's approvals view uses this API from the page.
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ListenConfig } from '../config/types.js';
import { GatewayError, retryAfterHeaders } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import { InvalidCursorError, type TaskRecord } from '../store/task-store.js';
import { APPROVALS_PAGE_MAX, commentRefusal, holdState, type Approvals, type DecisionAsked } from '../tasks/approvals.js';
import type { Caller } from '../principals.js';
import { checkAdminWrite } from './admin-writes.js';
import { AuthError, type Authenticator } from './credentials.js';
import { refusalIn } from './json-body.js';

/** The fixed path of the API (part of the contract approvers' tools are written against). */
export const APPROVALS_PATH = '/approvals';

export interface ApprovalsApiOptions {
  approvals: Pick<Approvals, 'pendingFor' | 'decide'>;
  /** Undefined without `auth`: nobody can be an approver, and every request is refused (403). */
  authenticator: Authenticator | undefined;
  listen: ListenConfig;
  events: GatewayEvents;
  logger: Logger;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: JsonObject = {},
  ) {
    super(message);
  }
}

export const approvalsApiPlugin: FastifyPluginAsync<ApprovalsApiOptions> = async (app: FastifyInstance, options: ApprovalsApiOptions) => {
  const { approvals, authenticator, listen, events, logger } = options;
  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    const status = error instanceof ApiError ? error.status : error instanceof GatewayError ? (error.httpStatus >= 400 ? error.httpStatus : 500) : (error.statusCode ?? 500);
    if (status >= 500) request.log.warn({ err: error }, 'approvals API request failed');
    const retry = error instanceof GatewayError ? retryAfterHeaders(error.data) : {};
    void reply.code(status).headers(retry).send({ error: error.message, ...(error instanceof ApiError ? error.body : {}) });
  });
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
  });

  /** Each admitted request's approver (set by the onRequest hook). */
  const approvers = new WeakMap<FastifyRequest, Caller>();
  // Refused before the body is read: a form or text body from another page gets the cross-site refusal, audited,
  // not the body parser's bare 415, and nobody unauthenticated makes the gateway parse a body.
  app.addHook('onRequest', async (request, reply) => {
    const caller = await approverOf(request, reply);
    if (caller === undefined) return reply;
    approvers.set(request, caller);
  });
  const admitted = (request: FastifyRequest): Caller => {
    const caller = approvers.get(request);
    if (caller === undefined) throw new Error('unreachable: an approvals request passed its onRequest hook without an approver');
    return caller;
  };

  /** The approver behind the request, or the refusal already sent. */
  const approverOf = async (request: FastifyRequest, reply: FastifyReply): Promise<Caller | undefined> => {
    try {
      checkAdminWrite(listen, request);
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      // Audited by the audit log's subscriber, which names the cause; the origin is for whoever investigates.
      events.emit('access.denied', { kind: 'cross-site', name: 'approvals', reason: error.message, status: error.httpStatus });
      logger.debug({ endpoint: 'approvals', origin: request.headers.origin }, 'approvals refused: cross-site');
      await reply.code(error.httpStatus).send({ error: error.message });
      return undefined;
    }
    if (authenticator === undefined) {
      await reply.code(403).send({ error: 'Forbidden: approvals need auth (approvers are authenticated principals)' });
      return undefined;
    }
    try {
      const header = request.headers.authorization;
      return await authenticator.authenticate(Array.isArray(header) ? header[0] : header);
    } catch (error) {
      if (error instanceof GatewayError) {
        await reply.code(503).header('retry-after', '5').send({ error: error.message });
        return undefined;
      }
      if (!(error instanceof AuthError)) throw error;
      events.emit('access.denied', { kind: 'credentials', name: 'approvals', reason: error.message });
      await reply.code(error.status).header('www-authenticate', authenticator.challenge(error)).send({ error: error.message });
      return undefined;
    }
  };

  app.get(APPROVALS_PATH, async (request) => {
    const caller = admitted(request);
    const page = await approvals.pendingFor(caller, pageIn(request.query)).catch((error: unknown) => {
      throw error instanceof InvalidCursorError ? new ApiError(400, 'Invalid cursor: pass a nextCursor this credential was given') : error;
    });
    const now = Date.now();
    return { now, approvals: page.tasks.map((task) => approvalView(task, now)), ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }) };
  });

  app.post(`${APPROVALS_PATH}/:taskId`, async (request) => {
    const caller = admitted(request);
    const { taskId } = request.params as { taskId: string };
    const answer = await approvals.decide(taskId, caller, decisionIn(request.body));
    if (!answer.ok) throw new ApiError(answer.status, answer.message, { reason: answer.reason, ...(answer.task === undefined ? {} : { approval: approvalView(answer.task, Date.now()) }) });
    return { approval: approvalView(answer.task, Date.now()) };
  });
};

/** The page a listing asks for (`?cursor=…&limit=…`); 400 for anything else. */
function pageIn(query: unknown): { cursor?: string; limit?: number } {
  const { cursor, limit } = (query ?? {}) as { cursor?: unknown; limit?: unknown };
  if (cursor !== undefined && (typeof cursor !== 'string' || cursor === '')) throw new ApiError(400, 'cursor must be a nextCursor a listing gave');
  let pageSize: number | undefined;
  if (limit !== undefined) {
    pageSize = typeof limit === 'string' && /^\d{1,6}$/.test(limit) ? Number(limit) : Number.NaN;
    if (!(pageSize >= 1 && pageSize <= APPROVALS_PAGE_MAX)) throw new ApiError(400, `limit must be a whole number from 1 to ${APPROVALS_PAGE_MAX}`);
  }
  return { ...(cursor === undefined ? {} : { cursor }), ...(pageSize === undefined ? {} : { limit: pageSize }) };
}

/** The decision a POST body asks for; 400 for anything else. */
function decisionIn(body: unknown): DecisionAsked {
  const refused = refusalIn(body);
  if (refused !== undefined) throw new ApiError(400, refused.message);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError(400, 'Expected a JSON object: {"decision": "approve" | "deny", "comment"?: string, "digest"?: string}');
  const { decision, comment, digest } = body as { decision?: unknown; comment?: unknown; digest?: unknown };
  if (decision !== 'approve' && decision !== 'deny') throw new ApiError(400, 'decision must be "approve" or "deny"');
  const badComment = commentRefusal(comment);
  if (badComment !== undefined) throw new ApiError(400, badComment, { reason: 'bad_comment' });
  if (digest !== undefined && (typeof digest !== 'string' || digest === '')) throw new ApiError(400, 'digest must be the digest string the listing showed for the call');
  return { decision, comment: comment as string | undefined, digest };
}

/**
 * A held call as approvers see it. The arguments are the kept call's, exactly as the upstream will get them (its
 * own tool name is `upstreamTool`); the digest binds the decision to them.
 */
export function approvalView(task: TaskRecord, now: number): JsonObject {
  const approval = task.approval;
  const params = task.call?.params;
  const view: JsonObject = {
    taskId: task.taskId,
    tool: task.tool,
    upstream: task.upstream,
    principal: task.principal,
    createdMs: task.createdMs,
    ageMs: Math.max(0, now - task.createdMs),
    taskStatus: task.status,
  };
  if (params !== undefined) {
    view.upstreamTool = params.name;
    view.arguments = params.arguments ?? {};
  }
  if (task.message !== undefined) view.statusMessage = task.message;
  if (approval !== undefined) {
    // A hold whose task was cancelled (or ended otherwise) before anyone decided says so, not `pending`.
    view.status = holdState(task) ?? approval.state;
    view.deadlineMs = approval.deadlineMs;
    view.deadline = new Date(approval.deadlineMs).toISOString();
    view.approvers = approval.approvers;
    view.scopes = approval.scopes;
    view.digest = approval.digest;
    if (approval.decidedBy !== undefined) view.decidedBy = approval.decidedBy;
    if (approval.comment !== undefined) view.comment = approval.comment;
    if (approval.decidedMs !== undefined) view.decidedMs = approval.decidedMs;
  }
  return view;
}
