// The official requester library for tasks, as applications use it: the v2 SDK client pinned to 2026-07-28 and
// @modelcontextprotocol/ext-tasks on top, against the gateway running a 2025-11-25 upstream's tools as tasks. The
// conformance suite checks the wire; this checks that what real applications read comes out right, for every
// outcome a task can have.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, type ApplicationInputRequest, type ApplicationInputResult } from '@modelcontextprotocol/ext-tasks/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import { suiteScope, type Json, type TestGateway } from '../helpers/harness.js';
import { sendRev2026, STATELESS_VERSION, TASKS_EXTENSION } from '../helpers/stateless-wire.js';

const CLIENT_INFO = { name: 'taskgate-ext-tasks-test', version: '1.0.0' };
const CLIENT_CAPABILITIES = { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } };

type Session = ReturnType<typeof createTaskSessionFromClient>;

/** The library's raw path for task wire shapes: one 2026-07-28 POST per request, answered as JSON or SSE. */
function rawDispatch(url: string) {
  return async (request: JsonValue) => {
    const { method, params = {} } = request as { method: string; params?: Json };
    const { _meta: meta, ...rest } = params;
    const answer = await sendRev2026(url, method, rest, { meta: meta as Json });
    if (answer.error !== undefined) return { kind: 'error' as const, error: answer.error as never };
    return { kind: 'result' as const, result: answer.result as JsonValue };
  };
}

describe('the v2 SDK client with ext-tasks through the gateway (2026-07-28 Tasks extension)', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let client: Client;
  let session: Session;
  const asked: ApplicationInputRequest[] = [];

  before(async () => {
    const upstream = await scope.upstream('stdio');
    gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: {
        defaults: { mode: 'optional', taskAfterMs: 250, pollIntervalMs: 100 },
        rules: [{ match: 'test_simple_text', mode: 'forbidden' }],
      },
    });
    client = new Client(CLIENT_INFO, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: STATELESS_VERSION } } });
    scope.defer(() => client.close());
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url)));
    assert.equal(client.getProtocolEra(), 'modern');
    session = createTaskSessionFromClient(client, {
      endpointId: 'taskgate-test',
      rawDispatch: rawDispatch(gateway.url),
      v2RequestFraming: { protocolVersion: STATELESS_VERSION, clientInfo: CLIENT_INFO, clientCapabilities: CLIENT_CAPABILITIES },
      onInputRequest: async <T extends ApplicationInputRequest>(request: T): Promise<ApplicationInputResult<T>> => {
        asked.push(request);
        return { action: 'accept', content: { confirm: true } } as unknown as ApplicationInputResult<T>;
      },
    });
    scope.defer(() => session.close());
  });

  async function settle(name: string, args: Json) {
    const execution = await session.callTool(name, args as Record<string, JsonValue>);
    return { kind: execution.kind, ...(await execution.settle()) };
  }

  test('a task that completes is completed, with the upstream result', async () => {
    const { kind, outcome } = await settle('slow_compute', { seconds: 0.6, label: 'ext' });
    assert.equal(kind, 'task');
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    const result = (outcome as { result: Json }).result;
    assert.deepEqual(result.structuredContent, { seconds: 0.6, label: 'ext' });
  });

  test('a tool error (isError) is a completed task whose result says so', async () => {
    const { outcome } = await settle('failing_job', {});
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    assert.equal((outcome as { result: Json }).result.isError, true);
  });

  test('a JSON-RPC error of the upstream is a failed task carrying that error', async () => {
    const { outcome } = await settle('protocol_error_job', {});
    assert.equal(outcome.status, 'failed', JSON.stringify(outcome));
    assert.match(String((outcome as { error: Error }).error.message), /protocol_error_job: simulated internal failure/);
  });

  test('a cancelled task is cancelled, and the upstream call stops', async () => {
    const execution = await session.callTool('slow_compute', { seconds: 30, label: 'ext-cancel' });
    assert.equal(execution.kind, 'task');
    await execution.cancel();
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, 'cancelled', JSON.stringify(outcome));
  });

  test('a task that asks for input is answered through the library and completes', async () => {
    asked.length = 0;
    const { kind, outcome } = await settle('confirm_delete', { filename: 'notes.txt' });
    assert.equal(kind, 'task');
    assert.equal(asked.length, 1, JSON.stringify(asked));
    assert.equal(asked[0]?.kind, 'elicitation');
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    assert.deepEqual((outcome as { result: Json }).result.structuredContent, { filename: 'notes.txt', deleted: true, action: 'accept' });
  });

  test('a call answered inside taskAfterMs is immediate, with the plain result', async () => {
    const { kind, outcome } = await settle('test_simple_text', {});
    assert.equal(kind, 'immediate');
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    assert.ok(JSON.stringify((outcome as { result: Json }).result.content).length > 2);
  });
});
