// The small pure functions at the gateway's edges: what each revision's error edge answers (JSON-RPC code and HTTP
// status), the 2026-07-28 request envelope and the headers that must agree with it, the gateway's side of an
// upstream's 2026-07-28 results, task timing, and task principals. Each rule is asserted as its doc comment states
// it; the integration tests exercise the same paths through real clients, but only a few of their cases.
// One file because each group is a few assertions on a few functions, too few for a file each, and the groups share the
// error matchers at its top (httpError, gatewayError).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY } from '../../src/config/schema.js';
import { mergePolicy, taskTiming } from '../../src/config/policy.js';
import type { TaskPolicy } from '../../src/config/types.js';
import { GatewayError, HeaderMismatch, InternalError, InvalidParams, InvalidRequest, MissingRequiredClientCapability, ResourceNotFound, UnsupportedProtocolVersion } from '../../src/errors.js';
import type { JsonObject, JsonRpcRequest } from '../../src/jsonrpc.js';
import { META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION, META_SERVER_INFO, TASKS_EXTENSION } from '../../src/mcp.js';
import { STATELESS_VERSION } from '../../src/protocol/rev2026-07-28/codec.js';
import { SUPPORTED_VERSIONS } from '../../src/protocol/revisions.js';
import * as rev2025 from '../../src/protocol/rev2025-11-25/codec.js';
import { exchangeAnswer, sessionError, sessionErrorResponse, sessionFailure, sessionRefusal } from '../../src/protocol/rev2025-11-25/errors.js';
import * as rev2026 from '../../src/protocol/rev2026-07-28/codec.js';
import {
  checkParamHeaders,
  checkRoutingHeaders,
  declaresTasks,
  missingTasksExtension,
  readEnvelope,
  withoutEnvelope,
  withoutTasksExtension,
  type StatelessClient,
} from '../../src/protocol/rev2026-07-28/envelope.js';
import { statelessAnswerStatus, statelessFailure, statelessRefusal, withUri } from '../../src/protocol/rev2026-07-28/errors.js';
import { paramsDigest, RequestStateCodec } from '../../src/protocol/rev2026-07-28/exchange.js';
import { ANONYMOUS_PRINCIPAL, STATELESS_PRINCIPAL, NATIVE_TASKS_PRINCIPAL, sessionOfPrincipal, sessionPrincipal } from '../../src/principals.js';

/** An error as the HTTP server (not the gateway) throws it: a status of its own. */
function httpError(message: string, statusCode?: number): Error & { statusCode?: number } {
  return Object.assign(new Error(message), statusCode === undefined ? {} : { statusCode });
}

/** A predicate for assert.throws: a GatewayError with this registry code. */
function gatewayError(code: GatewayError['code']): (error: unknown) => boolean {
  return (error) => error instanceof GatewayError && error.code === code;
}

describe('2026-07-28 requestState binds the request\'s params', () => {
  const codec = new RequestStateCodec(Buffer.from('0123456789abcdef0123456789abcdef'));
  const params = { name: 'confirm_delete', arguments: { filename: 'a.txt', delayMs: 0 } };

  it('paramsDigest: key order, _meta and the retry\'s own fields do not count; any argument does', () => {
    const digest = paramsDigest(params);
    assert.equal(paramsDigest({ arguments: { delayMs: 0, filename: 'a.txt' }, name: 'confirm_delete', _meta: { progressToken: 7 } }), digest);
    assert.equal(paramsDigest({ ...params, inputResponses: { k: {} }, requestState: 'x' }), digest);
    for (const changed of [{ filename: 'b.txt', delayMs: 0 }, { filename: 'a.txt', delayMs: 0, force: true }, { filename: 'a.txt' }, { filename: 'a.txt', delayMs: '0' }]) {
      assert.notEqual(paramsDigest({ ...params, arguments: changed }), digest, JSON.stringify(changed));
    }
  });

  it('decode: a state for other params is -32602 naming why; the same params pass', () => {
    const state = codec.encode({ x: 'x1', r: 0, m: 'tools/call', n: 'confirm_delete', p: paramsDigest(params), e: Date.now() + 60_000, o: 'r1' });
    assert.equal(codec.decode(state, 'tools/call', 'confirm_delete', paramsDigest(params)).x, 'x1');
    assert.throws(
      () => codec.decode(state, 'tools/call', 'confirm_delete', paramsDigest({ ...params, arguments: { filename: 'b.txt', delayMs: 0 } })),
      (error: unknown) => gatewayError('invalid_params')(error) && /same request with other params/.test((error as Error).message),
    );
  });
});

describe('2025-11-25 error edge', () => {
  it('sessionError: a GatewayError becomes its registry code, message and data', () => {
    assert.deepEqual(sessionError(new GatewayError('session_not_found', 'Session not found')), { code: -32001, message: 'Session not found' });
    assert.deepEqual(sessionError(new GatewayError('upstream_unavailable', 'down', { upstream: 'fx' })), { code: InternalError, message: 'down', data: { upstream: 'fx' } });
  });

  it('sessionError: an unexpected error becomes -32603 "Internal error: …" without its stack', () => {
    const error = sessionError(new TypeError('boom'));
    assert.deepEqual(error, { code: InternalError, message: 'Internal error: boom' });
    assert.ok(!error.message.includes(' at '), 'no stack frames in the message');
    assert.deepEqual(sessionError('not an Error'), { code: InternalError, message: 'Internal error: not an Error' });
  });

  it('sessionErrorResponse: a JSON-RPC failure to the id (null when none), data kept', () => {
    assert.deepEqual(sessionErrorResponse(7, new GatewayError('invalid_params', 'Invalid params: x', { field: 'x' })), {
      jsonrpc: '2.0',
      id: 7,
      error: { code: InvalidParams, message: 'Invalid params: x', data: { field: 'x' } },
    });
    assert.deepEqual(sessionErrorResponse(null, new Error('oops')), { jsonrpc: '2.0', id: null, error: { code: InternalError, message: 'Internal error: oops' } });
  });

  it('sessionRefusal: a GatewayError gets its registry HTTP status and its code and message', () => {
    assert.deepEqual(sessionRefusal(null, new GatewayError('session_not_found', 'Session not found')), {
      status: 404,
      body: { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } },
    });
    assert.deepEqual(sessionRefusal('r1', new GatewayError('conflict', 'Conflict: a GET stream is already open')), {
      status: 409,
      body: { jsonrpc: '2.0', id: 'r1', error: { code: InvalidRequest, message: 'Conflict: a GET stream is already open' } },
    });
    assert.equal(sessionRefusal(null, new GatewayError('too_many_sessions', 'Too many sessions')).status, 429);
  });

  it('sessionFailure / exchangeAnswer: a rate limit (429) or a full replica (503) refuses its exchange, Retry-After in whole seconds; other failures answer 200', () => {
    const limited = sessionFailure(new GatewayError('rate_limited', 'Rate limit exceeded', { retryAfterMs: 1500 }));
    assert.deepEqual(limited, { error: { code: -32001, message: 'Rate limit exceeded', data: { retryAfterMs: 1500 } }, httpStatus: 429 });
    assert.deepEqual(exchangeAnswer(limited), { status: 429, headers: { 'retry-after': '2' } });
    const full = sessionFailure(new GatewayError('replica_full', 'full', { retryAfterMs: 1000 }));
    assert.deepEqual(full, { error: { code: -32603, message: 'full', data: { retryAfterMs: 1000 } }, httpStatus: 503 });
    assert.deepEqual(exchangeAnswer(full), { status: 503, headers: { 'retry-after': '1' } });
    for (const error of [new GatewayError('invalid_params', 'x'), new Error('boom')]) {
      const outcome = sessionFailure(error);
      assert.ok(!('httpStatus' in outcome), String(error));
      assert.deepEqual(exchangeAnswer(outcome), { status: 200, headers: {} });
    }
    assert.deepEqual(exchangeAnswer({ result: {} }), { status: 200, headers: {} });
  });

  it('sessionRefusal: where the registry\'s status is not an error status (200) the refusal is 500', () => {
    assert.deepEqual(sessionRefusal(null, new GatewayError('invalid_params', 'Invalid params: bad')), {
      status: 500,
      body: { jsonrpc: '2.0', id: null, error: { code: InvalidParams, message: 'Invalid params: bad' } },
    });
  });

  it('sessionRefusal: the HTTP server\'s own failures keep their status and count as invalid requests', () => {
    assert.deepEqual(sessionRefusal(null, httpError('Request body is too large', 413)), {
      status: 413,
      body: { jsonrpc: '2.0', id: null, error: { code: InvalidRequest, message: 'Request body is too large' } },
    });
  });

  it('sessionRefusal: a failure that is not the gateway\'s and has no status is 500', () => {
    const { status, body } = sessionRefusal(null, new Error('unexpected'));
    assert.equal(status, 500);
    assert.equal(body.error.code, InvalidRequest);
    assert.equal(body.error.message, 'unexpected');
  });

  it('sessionRefusal: a non-error status on a foreign failure also becomes 500', () => {
    assert.equal(sessionRefusal(null, httpError('redirect?', 302)).status, 500);
  });
});

describe('2026-07-28 error edge', () => {
  it('statelessRefusal: a GatewayError gets its registry HTTP status, code, message and data', () => {
    const refused = statelessRefusal(3, new GatewayError('unsupported_version', 'Unsupported protocol version', { supported: ['2026-07-28'] }));
    assert.deepEqual(refused, {
      status: 400,
      body: { jsonrpc: '2.0', id: 3, error: { code: UnsupportedProtocolVersion, message: 'Unsupported protocol version', data: { supported: ['2026-07-28'] } } },
    });
    assert.equal(statelessRefusal(null, new GatewayError('stateless_method_not_found', 'Method not found')).status, 404);
    assert.equal(statelessRefusal(null, new GatewayError('not_acceptable', 'Not Acceptable')).status, 406);
  });

  it('statelessRefusal: what is not the gateway\'s own is 500 with -32603 "Internal error: …"', () => {
    assert.deepEqual(statelessRefusal(null, new Error('boom')), {
      status: 500,
      body: { jsonrpc: '2.0', id: null, error: { code: InternalError, message: 'Internal error: boom' } },
    });
  });

  it('statelessFailure: request-level (4xx) GatewayErrors keep their HTTP status', () => {
    assert.deepEqual(statelessFailure(new GatewayError('header_mismatch', 'Header mismatch')), { outcome: { error: { code: HeaderMismatch, message: 'Header mismatch' } }, status: 400 });
    assert.equal(statelessFailure(new GatewayError('stateless_method_not_found', 'Method not found')).status, 404);
    assert.equal(statelessFailure(new GatewayError('missing_capability', 'needs tasks')).status, 400);
  });

  it('statelessFailure: every other failure is a JSON-RPC error in a 200', () => {
    assert.deepEqual(statelessFailure(new GatewayError('internal', 'Internal error: x')), { outcome: { error: { code: InternalError, message: 'Internal error: x' } }, status: 200 });
    assert.equal(statelessFailure(new GatewayError('shutting_down', 'shutting down')).status, 200);
    assert.equal(statelessFailure(new GatewayError('invalid_params', 'Invalid params')).status, 200);
    assert.deepEqual(statelessFailure(new Error('boom')), { outcome: { error: { code: InternalError, message: 'Internal error: boom' } }, status: 200 });
  });

  it('statelessAnswerStatus: -32020, -32021 and -32022 are request-level (400), whoever answered them', () => {
    for (const code of [HeaderMismatch, MissingRequiredClientCapability, UnsupportedProtocolVersion]) {
      assert.equal(statelessAnswerStatus({ error: { code, message: 'm' } }), 400, String(code));
    }
  });

  it('statelessAnswerStatus: other errors and every result are 200', () => {
    for (const code of [InternalError, InvalidParams, InvalidRequest, -32601, -32001]) {
      assert.equal(statelessAnswerStatus({ error: { code, message: 'm' } }), 200, String(code));
    }
    assert.equal(statelessAnswerStatus({ result: { resultType: 'complete' } }), 200);
  });

  it('withUri: a resource-not-found (-32002) or invalid-params (-32602) error without data names the URI', () => {
    const notFound: { code: number; message: string; data?: unknown } = { code: ResourceNotFound, message: 'Resource not found' };
    withUri(notFound, 'file:///a');
    assert.deepEqual(notFound, { code: ResourceNotFound, message: 'Resource not found', data: { uri: 'file:///a' } });
    const invalid: { code: number; data?: unknown } = { code: InvalidParams };
    withUri(invalid, 'file:///b');
    assert.deepEqual(invalid.data, { uri: 'file:///b' });
  });

  it('withUri: other codes, existing data and non-string URIs are left alone', () => {
    const other: { code: number; data?: unknown } = { code: InternalError };
    withUri(other, 'file:///a');
    assert.equal(other.data, undefined);
    const withData: { code: number; data?: unknown } = { code: ResourceNotFound, data: { uri: 'file:///kept' } };
    withUri(withData, 'file:///a');
    assert.deepEqual(withData.data, { uri: 'file:///kept' });
    const noUri: { code: number; data?: unknown } = { code: ResourceNotFound };
    withUri(noUri, undefined);
    withUri(noUri, 42);
    assert.equal(noUri.data, undefined);
  });
});

describe('2026-07-28 codec: the gateway as a client of a 2026-07-28 upstream', () => {
  it('withoutStatelessFields: a 2025 client gets no resultType, ttlMs nor cacheScope; everything else stays', () => {
    const result = { resultType: 'complete', ttlMs: 0, cacheScope: 'private', tools: [{ name: 't' }], nextCursor: 'c', _meta: { k: 1 } };
    assert.deepEqual(rev2026.withoutStatelessFields(result), { tools: [{ name: 't' }], nextCursor: 'c', _meta: { k: 1 } });
    assert.equal(result.resultType, 'complete', 'the upstream\'s result is not mutated');
  });

  it('inputRequestsOf: only an InputRequiredResult has questions; malformed ones have none', () => {
    const inputRequests = { 'elicitation-1': { method: 'elicitation/create', params: { message: 'ok?' } } };
    assert.deepEqual(rev2026.inputRequestsOf({ resultType: 'input_required', inputRequests, requestState: 's' }), inputRequests);
    assert.equal(rev2026.inputRequestsOf({ resultType: 'complete', inputRequests }), undefined);
    assert.equal(rev2026.inputRequestsOf({ content: [] }), undefined);
    assert.deepEqual(rev2026.inputRequestsOf({ resultType: 'input_required' }), {});
    assert.deepEqual(rev2026.inputRequestsOf({ resultType: 'input_required', inputRequests: [] }), {});
    assert.deepEqual(rev2026.inputRequestsOf({ resultType: 'input_required', inputRequests: null }), {});
  });

  it('retryParams: the first request\'s params with this round\'s answers and the new request state', () => {
    const params = { name: 'slow', arguments: { n: 1 }, _meta: { progressToken: 'p' }, inputResponses: { old: {} }, requestState: 'old-state' };
    const answers = { 'elicitation-2': { action: 'accept' } };
    assert.deepEqual(rev2026.retryParams(params, answers, { resultType: 'input_required', requestState: 'new-state' }), {
      name: 'slow',
      arguments: { n: 1 },
      _meta: { progressToken: 'p' },
      inputResponses: answers,
      requestState: 'new-state',
    });
    assert.equal(params.requestState, 'old-state', 'the first request\'s params are not mutated');
  });

  it('retryParams: without a new request state the previous one is not sent again', () => {
    const retry = rev2026.retryParams({ name: 'slow', requestState: 'old' }, { a: {} }, { resultType: 'input_required', requestState: 7 });
    assert.deepEqual(retry, { name: 'slow', inputResponses: { a: {} } });
  });
});

describe('2026-07-28 codec: server/discover', () => {
  it('lists the revisions, the upstreams\' capabilities with listChanged, and the Tasks extension instead of tasks', () => {
    const upstream = { tools: { listChanged: false, extra: 1 }, logging: {}, tasks: { list: {} }, extensions: { 'vendor/x': { on: true } } };
    assert.deepEqual(rev2026.discoverResult(upstream, undefined, '1.2.3', SUPPORTED_VERSIONS), {
      resultType: 'complete',
      supportedVersions: [...SUPPORTED_VERSIONS],
      capabilities: {
        tools: { listChanged: true, extra: 1 },
        prompts: { listChanged: true },
        resources: { listChanged: true },
        logging: {},
        extensions: { 'vendor/x': { on: true }, [TASKS_EXTENSION]: {} },
      },
      ttlMs: 0,
      cacheScope: 'private',
      _meta: { [META_SERVER_INFO]: { name: 'taskgate', title: 'taskgate MCP gateway', version: '1.2.3' } },
    });
  });

  it('instructions only when given', () => {
    assert.equal(rev2026.discoverResult({}, 'Use the tools wisely.', '1', SUPPORTED_VERSIONS).instructions, 'Use the tools wisely.');
    assert.ok(!('instructions' in rev2026.discoverResult({}, undefined, '1', SUPPORTED_VERSIONS)));
  });

  it('the upstreams\' capabilities object is not mutated', () => {
    const upstream = { tools: { listChanged: false }, tasks: { list: {} }, extensions: { 'vendor/x': {} } };
    const before = structuredClone(upstream);
    rev2026.discoverResult(upstream, undefined, '1', SUPPORTED_VERSIONS);
    assert.deepEqual(upstream, before);
  });
});

describe('2025-11-25 codec: the gateway as a client of an upstream\'s own tasks', () => {
  it('suggestedPollMs: the Task\'s pollInterval when it is a finite number', () => {
    assert.equal(rev2025.suggestedPollMs({ taskId: 't', pollInterval: 2500 }), 2500);
    assert.equal(rev2025.suggestedPollMs({ taskId: 't' }), undefined);
    assert.equal(rev2025.suggestedPollMs({ taskId: 't', pollInterval: '2500' }), undefined);
    assert.equal(rev2025.suggestedPollMs({ taskId: 't', pollInterval: Number.NaN }), undefined);
    assert.equal(rev2025.suggestedPollMs({ taskId: 't', pollInterval: Number.POSITIVE_INFINITY }), undefined);
  });

  it('taskStatusMessage: the statusMessage when it is a string', () => {
    assert.equal(rev2025.taskStatusMessage({ taskId: 't', status: 'working', statusMessage: 'halfway' }), 'halfway');
    assert.equal(rev2025.taskStatusMessage({ taskId: 't', status: 'working' }), undefined);
    assert.equal(rev2025.taskStatusMessage({ statusMessage: 3 }), undefined);
    assert.equal(rev2025.taskStatusMessage(undefined), undefined);
  });
});

const CAPABILITIES = { extensions: { [TASKS_EXTENSION]: {} } };

function request(method: string, params: JsonObject = {}, meta?: JsonObject): JsonRpcRequest {
  const envelope = meta ?? { [META_PROTOCOL_VERSION]: STATELESS_VERSION, [META_CLIENT_CAPABILITIES]: CAPABILITIES };
  return { jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: envelope } };
}

const VERSION_HEADER = { 'mcp-protocol-version': STATELESS_VERSION };

describe('2026-07-28 envelope: readEnvelope', () => {
  it('a complete envelope whose version the header repeats: the client it describes', () => {
    const info = { name: 'c', version: '1' };
    const client = readEnvelope(request('tools/list', {}, {
      [META_PROTOCOL_VERSION]: STATELESS_VERSION,
      [META_CLIENT_CAPABILITIES]: CAPABILITIES,
      [META_CLIENT_INFO]: info,
      [META_LOG_LEVEL]: 'warning',
    }), VERSION_HEADER, SUPPORTED_VERSIONS);
    assert.deepEqual(client, { protocolVersion: STATELESS_VERSION, capabilities: CAPABILITIES, clientInfo: info, logLevel: 'warning' });
  });

  it('client info and log level are optional', () => {
    assert.deepEqual(readEnvelope(request('tools/list'), VERSION_HEADER, SUPPORTED_VERSIONS), { protocolVersion: STATELESS_VERSION, capabilities: CAPABILITIES, clientInfo: undefined, logLevel: undefined });
  });

  it('the first of repeated MCP-Protocol-Version headers counts', () => {
    assert.equal(readEnvelope(request('tools/list'), { 'mcp-protocol-version': [STATELESS_VERSION, 'other'] }, SUPPORTED_VERSIONS).protocolVersion, STATELESS_VERSION);
  });

  it('no MCP-Protocol-Version header: header_mismatch, checked before the envelope', () => {
    assert.throws(() => readEnvelope(request('tools/list'), {}, SUPPORTED_VERSIONS), gatewayError('header_mismatch'));
    assert.throws(() => readEnvelope({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, {}, SUPPORTED_VERSIONS), gatewayError('header_mismatch'));
  });

  it('no _meta, a protocol version that is not a string, or capabilities that are not an object: invalid_envelope', () => {
    assert.throws(() => readEnvelope({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, VERSION_HEADER, SUPPORTED_VERSIONS), gatewayError('invalid_envelope'));
    assert.throws(() => readEnvelope({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: 'x' } }, VERSION_HEADER, SUPPORTED_VERSIONS), gatewayError('invalid_envelope'));
    assert.throws(() => readEnvelope(request('tools/list', {}, { [META_CLIENT_CAPABILITIES]: {} }), VERSION_HEADER, SUPPORTED_VERSIONS), gatewayError('invalid_envelope'));
    assert.throws(() => readEnvelope(request('tools/list', {}, { [META_PROTOCOL_VERSION]: 20260728, [META_CLIENT_CAPABILITIES]: {} }), VERSION_HEADER, SUPPORTED_VERSIONS), gatewayError('invalid_envelope'));
    assert.throws(() => readEnvelope(request('tools/list', {}, { [META_PROTOCOL_VERSION]: STATELESS_VERSION }), VERSION_HEADER, SUPPORTED_VERSIONS), gatewayError('invalid_envelope'));
    assert.throws(() => readEnvelope(request('tools/list', {}, { [META_PROTOCOL_VERSION]: STATELESS_VERSION, [META_CLIENT_CAPABILITIES]: [] }), VERSION_HEADER, SUPPORTED_VERSIONS), gatewayError('invalid_envelope'));
  });

  it('a header that disagrees with the envelope: header_mismatch, checked before the version is judged', () => {
    assert.throws(() => readEnvelope(request('tools/list'), { 'mcp-protocol-version': '2025-11-25' }, SUPPORTED_VERSIONS), gatewayError('header_mismatch'));
    const unsupportedBoth = request('tools/list', {}, { [META_PROTOCOL_VERSION]: '1999-01-01', [META_CLIENT_CAPABILITIES]: {} });
    assert.throws(() => readEnvelope(unsupportedBoth, VERSION_HEADER, SUPPORTED_VERSIONS), gatewayError('header_mismatch'));
  });

  it('a version that is not a 2026-07-28 revision (a session revision too): unsupported_version, listing the supported ones', () => {
    for (const version of ['1999-01-01', '2025-11-25']) {
      const envelope = request('tools/list', {}, { [META_PROTOCOL_VERSION]: version, [META_CLIENT_CAPABILITIES]: {} });
      assert.throws(
        () => readEnvelope(envelope, { 'mcp-protocol-version': version }, SUPPORTED_VERSIONS),
        (e) => e instanceof GatewayError && e.code === 'unsupported_version' && JSON.stringify(e.data) === JSON.stringify({ supported: [...SUPPORTED_VERSIONS], requested: version }),
      );
    }
  });

  it('a log level that is not one of the revision\'s: invalid_envelope', () => {
    const envelope = request('tools/list', {}, { [META_PROTOCOL_VERSION]: STATELESS_VERSION, [META_CLIENT_CAPABILITIES]: {}, [META_LOG_LEVEL]: 'verbose' });
    assert.throws(() => readEnvelope(envelope, VERSION_HEADER, SUPPORTED_VERSIONS), gatewayError('invalid_envelope'));
  });
});

describe('2026-07-28 envelope: routing headers', () => {
  it('Mcp-Method equals the method (surrounding whitespace ignored); methods without a name need no Mcp-Name', () => {
    assert.doesNotThrow(() => checkRoutingHeaders(request('tools/list'), { 'mcp-method': 'tools/list' }));
    assert.doesNotThrow(() => checkRoutingHeaders(request('tools/list'), { 'mcp-method': ' tools/list ' }));
  });

  it('no Mcp-Method, or one that differs from the body: header_mismatch', () => {
    assert.throws(() => checkRoutingHeaders(request('tools/list'), {}), gatewayError('header_mismatch'));
    assert.throws(() => checkRoutingHeaders(request('tools/list'), { 'mcp-method': 'prompts/list' }), gatewayError('header_mismatch'));
  });

  it('Mcp-Name equals the name, URI or task id the method carries', () => {
    assert.doesNotThrow(() => checkRoutingHeaders(request('tools/call', { name: 'fx__slow' }), { 'mcp-method': 'tools/call', 'mcp-name': 'fx__slow' }));
    assert.doesNotThrow(() => checkRoutingHeaders(request('resources/read', { uri: 'file:///a' }), { 'mcp-method': 'resources/read', 'mcp-name': ' file:///a ' }));
    assert.doesNotThrow(() => checkRoutingHeaders(request('tasks/get', { taskId: 't-1' }), { 'mcp-method': 'tasks/get', 'mcp-name': 't-1' }));
  });

  it('an Mcp-Name in the =?base64?…?= sentinel is decoded before comparing', () => {
    const name = 'café ☕';
    const encoded = `=?base64?${Buffer.from(name, 'utf8').toString('base64')}?=`;
    assert.doesNotThrow(() => checkRoutingHeaders(request('prompts/get', { name }), { 'mcp-method': 'prompts/get', 'mcp-name': encoded }));
  });

  it('an Mcp-Name that is missing, differs, or is invalid base64: header_mismatch', () => {
    const call = request('tools/call', { name: 'fx__slow' });
    assert.throws(() => checkRoutingHeaders(call, { 'mcp-method': 'tools/call' }), gatewayError('header_mismatch'));
    assert.throws(() => checkRoutingHeaders(call, { 'mcp-method': 'tools/call', 'mcp-name': 'fx__fast' }), gatewayError('header_mismatch'));
    assert.throws(() => checkRoutingHeaders(call, { 'mcp-method': 'tools/call', 'mcp-name': '=?base64?not base64!?=' }), gatewayError('header_mismatch'));
  });

  it('tasks/get, tasks/update, tasks/cancel without Mcp-Name are let off (and say so); with a different one they are not', () => {
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      assert.equal(checkRoutingHeaders(request(method, { taskId: 't-1' }), { 'mcp-method': method }), 'missing_mcp_name', method);
      assert.equal(checkRoutingHeaders(request(method, { taskId: 't-1' }), { 'mcp-method': method, 'mcp-name': 't-1' }), undefined, method);
      assert.throws(() => checkRoutingHeaders(request(method, { taskId: 't-1' }), { 'mcp-method': method, 'mcp-name': 't-2' }), gatewayError('header_mismatch'));
    }
    assert.throws(() => checkRoutingHeaders(request('prompts/get', { name: 'p' }), { 'mcp-method': 'prompts/get' }), gatewayError('header_mismatch'));
    assert.throws(() => checkRoutingHeaders(request('resources/read', { uri: 'file:///a' }), { 'mcp-method': 'resources/read' }), gatewayError('header_mismatch'));
  });

  it('a method whose name parameter is missing needs no Mcp-Name (the handler reports the parameter)', () => {
    assert.doesNotThrow(() => checkRoutingHeaders(request('tools/call'), { 'mcp-method': 'tools/call' }));
  });
});

describe('2026-07-28 envelope: Mcp-Param headers', () => {
  const tool = {
    name: 'deploy',
    inputSchema: {
      type: 'object',
      properties: {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        count: { type: 'number', 'x-mcp-header': 'Count' },
        note: { type: 'string' },
      },
    },
  };

  it('each argument the schema mirrors needs its header, and they must agree', () => {
    assert.doesNotThrow(() => checkParamHeaders(tool, { region: 'eu-west', count: 3, note: 'n' }, { 'mcp-param-region': 'eu-west', 'mcp-param-count': '3' }));
    assert.doesNotThrow(() => checkParamHeaders(tool, { count: 3 }, { 'mcp-param-count': ' 3.0 ' }), 'numbers compare as numbers');
  });

  it('arguments that are absent or null need no header; nor does a tool without a schema', () => {
    assert.doesNotThrow(() => checkParamHeaders(tool, { region: null, note: 'n' }, {}));
    assert.doesNotThrow(() => checkParamHeaders(tool, undefined, {}));
    assert.doesNotThrow(() => checkParamHeaders(undefined, { region: 'eu-west' }, {}));
  });

  it('a missing or disagreeing header: header_mismatch', () => {
    assert.throws(() => checkParamHeaders(tool, { region: 'eu-west' }, {}), gatewayError('header_mismatch'));
    assert.throws(() => checkParamHeaders(tool, { region: 'eu-west' }, { 'mcp-param-region': 'us-east' }), gatewayError('header_mismatch'));
    assert.throws(() => checkParamHeaders(tool, { count: 3 }, { 'mcp-param-count': '4' }), gatewayError('header_mismatch'));
  });

  it('an empty header does not stand for the number 0', () => {
    assert.throws(() => checkParamHeaders(tool, { count: 0 }, { 'mcp-param-count': ' ' }), gatewayError('header_mismatch'));
    assert.doesNotThrow(() => checkParamHeaders(tool, { count: 0 }, { 'mcp-param-count': '0' }));
  });

  it('a header value in the base64 sentinel is decoded before comparing', () => {
    const region = 'région';
    assert.doesNotThrow(() => checkParamHeaders(tool, { region }, { 'mcp-param-region': `=?base64?${Buffer.from(region).toString('base64')}?=` }));
  });
});

describe('2026-07-28 envelope: the Tasks extension and forwarding', () => {
  function client(capabilities: JsonObject): StatelessClient {
    return { protocolVersion: STATELESS_VERSION, capabilities, clientInfo: undefined, logLevel: undefined };
  }

  it('declaresTasks: only when the extension is declared as an object under capabilities.extensions', () => {
    assert.equal(declaresTasks(client(CAPABILITIES)), true);
    assert.equal(declaresTasks(client({ extensions: { [TASKS_EXTENSION]: { any: 1 } } })), true);
    assert.equal(declaresTasks(client({})), false);
    assert.equal(declaresTasks(client({ extensions: { 'vendor/x': {} } })), false);
    assert.equal(declaresTasks(client({ extensions: { [TASKS_EXTENSION]: true } })), false);
    assert.equal(declaresTasks(client({ tasks: {} })), false, 'the 2025 tasks capability is not the extension');
  });

  it('missingTasksExtension: a missing_capability error (-32021, HTTP 400) naming what needs the extension', () => {
    const error = missingTasksExtension('tasks/get');
    assert.equal(error.code, 'missing_capability');
    assert.equal(error.httpStatus, 400);
    assert.equal(error.toJsonRpc().code, MissingRequiredClientCapability);
    assert.ok(error.message.startsWith('tasks/get requires the io.modelcontextprotocol/tasks extension'), error.message);
    assert.deepEqual(error.data, { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
  });

  it('withoutTasksExtension: the envelope with the Tasks extension removed, everything else kept, nothing mutated', () => {
    const meta = {
      [META_PROTOCOL_VERSION]: STATELESS_VERSION,
      [META_CLIENT_CAPABILITIES]: { sampling: {}, extensions: { [TASKS_EXTENSION]: {}, 'vendor/x': { on: true } } },
      progressToken: 'p',
    };
    const before = structuredClone(meta);
    assert.deepEqual(withoutTasksExtension(meta), {
      [META_PROTOCOL_VERSION]: STATELESS_VERSION,
      [META_CLIENT_CAPABILITIES]: { sampling: {}, extensions: { 'vendor/x': { on: true } } },
      progressToken: 'p',
    });
    assert.deepEqual(meta, before);
  });

  it('withoutTasksExtension: an absent envelope becomes capabilities with no extensions', () => {
    assert.deepEqual(withoutTasksExtension(undefined), { [META_CLIENT_CAPABILITIES]: { extensions: {} } });
  });

  it('withoutEnvelope: the envelope keys go; a progress token and vendor keys stay', () => {
    const params = {
      name: 'slow',
      _meta: { [META_PROTOCOL_VERSION]: STATELESS_VERSION, [META_CLIENT_CAPABILITIES]: {}, [META_CLIENT_INFO]: {}, [META_LOG_LEVEL]: 'info', progressToken: 'p', 'vendor.example/trace': 'abc' },
    };
    assert.deepEqual(withoutEnvelope(params), { name: 'slow', _meta: { progressToken: 'p', 'vendor.example/trace': 'abc' } });
    assert.equal((params._meta as JsonObject)[META_PROTOCOL_VERSION], STATELESS_VERSION, 'the request is not mutated');
  });

  it('withoutEnvelope: _meta left empty is dropped; params without _meta come back as they are', () => {
    assert.deepEqual(withoutEnvelope({ name: 'slow', _meta: { [META_PROTOCOL_VERSION]: STATELESS_VERSION } }), { name: 'slow' });
    const plain = { name: 'slow' };
    assert.equal(withoutEnvelope(plain), plain);
  });
});

describe('task timing', () => {
  const policy: TaskPolicy = { ...DEFAULT_POLICY, ttlMs: 60_000, maxTtlMs: 600_000, pollIntervalMs: 750 };

  it('a requested ttl within maxTtlMs is granted; a larger one is clamped to maxTtlMs', () => {
    assert.deepEqual(taskTiming(policy, 120_000), { retentionMs: 120_000, pollMs: 750 });
    assert.deepEqual(taskTiming(policy, 600_000), { retentionMs: 600_000, pollMs: 750 });
    assert.deepEqual(taskTiming(policy, 10_000_000), { retentionMs: 600_000, pollMs: 750 });
  });

  it('a fractional request is floored to whole milliseconds', () => {
    assert.equal(taskTiming(policy, 1500.9).retentionMs, 1500);
  });

  it('no usable request (absent, not a number, zero, negative, NaN, infinite): the policy\'s ttlMs', () => {
    for (const requested of [undefined, null, '120000', 0, 1e-9, 0.999, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.deepEqual(taskTiming(policy, requested), { retentionMs: 60_000, pollMs: 750 }, String(requested));
    }
  });

  it('2025-11-25 params.task.ttl: absent is the default; a whole number of ms from 1 is taken; anything else is -32602', () => {
    assert.equal(rev2025.requestedTtl({}), undefined);
    assert.equal(rev2025.requestedTtl({ ttl: 1 }), 1);
    assert.equal(rev2025.requestedTtl({ ttl: 60_000 }), 60_000);
    assert.equal(rev2025.requestedTtl({ ttl: Number.MAX_SAFE_INTEGER }), Number.MAX_SAFE_INTEGER);
    for (const ttl of [0, 1e-9, 1500.5, -1, -0.5, 1e300, Number.MAX_SAFE_INTEGER + 1, null, '60000', [60000], {}, true]) {
      assert.throws(() => rev2025.requestedTtl({ ttl }), (error: unknown) => gatewayError('invalid_params')(error) && /params\.task must be an object whose ttl, if given, is a whole number of milliseconds/.test((error as Error).message), JSON.stringify(ttl));
    }
    for (const task of [null, 5, 'x', [{ ttl: 1 }]]) assert.throws(() => rev2025.requestedTtl(task), gatewayError('invalid_params'), JSON.stringify(task));
  });

  it('the policy\'s ttlMs is itself never granted past maxTtlMs', () => {
    assert.equal(taskTiming({ ...policy, ttlMs: 900_000 }, undefined).retentionMs, 600_000);
  });

  it('mergePolicy: a rule\'s match is not a policy field, and fields a rule leaves undefined keep the default', () => {
    const merged = mergePolicy(policy, { match: 'fx__*', ttlMs: undefined, pollIntervalMs: 5000 });
    assert.deepEqual(merged, { ...policy, pollIntervalMs: 5000 });
    assert.ok(!('match' in merged));
    assert.equal(policy.pollIntervalMs, 750, 'the defaults are not mutated');
    assert.notEqual(mergePolicy(policy, undefined), policy, 'without a rule, a copy of the defaults');
  });
});

describe('task principals', () => {
  it('a 2025-11-25 session\'s principal names the session, and gives it back', () => {
    assert.equal(sessionOfPrincipal(sessionPrincipal('s1')), 's1');
    assert.equal(sessionOfPrincipal(sessionPrincipal('a:b:c')), 'a:b:c');
    assert.notEqual(sessionPrincipal('s1'), sessionPrincipal('s2'));
  });

  it('principals that are not a session\'s name no session', () => {
    for (const principal of [STATELESS_PRINCIPAL, ANONYMOUS_PRINCIPAL, NATIVE_TASKS_PRINCIPAL, '', 'sessions:s1']) {
      assert.equal(sessionOfPrincipal(principal), undefined, principal);
    }
  });
});
