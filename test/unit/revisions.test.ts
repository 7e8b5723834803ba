// The revision registry: which revision serves an incoming message, asked in the registry's order.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { creatorOf, REVISION_IDS, REVISIONS, SUPPORTED_VERSIONS, UPSTREAM_ADAPTERS, WIRE_CODECS } from '../../src/protocol/revisions.js';
import { SESSION_VERSIONS } from '../../src/mcp.js';
import { STATELESS_VERSIONS } from '../../src/protocol/rev2026-07-28/codec.js';
import { refusalFor } from '../../src/http/mcp-endpoint.js';
import { GatewayError } from '../../src/errors.js';

const noSession = (): boolean => false;

/** The revision the MCP endpoint hands a POSTed message to: the first entry, in the registry's order, that claims it. */
const revisionOf = (body: unknown, headers: Record<string, string>, isKnownSession: (id: string) => boolean) =>
  REVISIONS.find((revision) => revision.claims(body, headers, isKnownSession));
const envelope = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

describe('revision registry', () => {
  it('lists each revision once, with every version the gateway speaks, the stateless ones first', () => {
    assert.deepEqual(REVISIONS.map((r) => r.id), ['2026-07-28', '2025-11-25']);
    assert.deepEqual(REVISIONS.flatMap((r) => r.versions), [...STATELESS_VERSIONS, ...SESSION_VERSIONS]);
    assert.deepEqual(REVISIONS.map((r) => r.sessions), [false, true]);
  });

  it('a message with the 2026-07-28 envelope, version header or method goes to 2026-07-28', () => {
    assert.equal(revisionOf({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope } }, {}, noSession)?.id, '2026-07-28');
    assert.equal(revisionOf({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-protocol-version': '2026-07-28' }, noSession)?.id, '2026-07-28');
    assert.equal(revisionOf({ jsonrpc: '2.0', id: 1, method: 'server/discover' }, {}, noSession)?.id, '2026-07-28');
  });

  it('initialize, session traffic and whatever the stateless revision declines go to the session revisions', () => {
    assert.equal(revisionOf({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }, {}, noSession)?.id, '2025-11-25');
    assert.equal(revisionOf({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-protocol-version': '2025-11-25' }, noSession)?.id, '2025-11-25');
    assert.equal(revisionOf('not even an object', {}, noSession)?.id, '2025-11-25');
    // A known session's message is that session's, whatever its version header says.
    const known = (id: string): boolean => id === 's1';
    assert.equal(revisionOf({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-session-id': 's1', 'mcp-protocol-version': '2026-07-28' }, known)?.id, '2025-11-25');
  });

  it('each revision creates tasks of its own era (its id, its codec\'s), so a recovered or lost task finds the revision that made it', () => {
    assert.deepEqual(REVISIONS.map((r) => r.codec.revision), REVISIONS.map((r) => r.id));
    const served = REVISIONS.map((revision) => ({ revision }));
    assert.equal(creatorOf(served, { taskId: 't1', era: '2025-11-25' }).revision.id, '2025-11-25');
    assert.equal(creatorOf(served, { taskId: 't2', era: '2026-07-28' }).revision.id, '2026-07-28');
  });

  it('a task of an era no revision serves is an error naming the task and its era, never some default revision', () => {
    const served = REVISIONS.map((revision) => ({ revision }));
    for (const era of ['2099-01-01', 'legacy', 'modern', '']) {
      assert.throws(() => creatorOf(served, { taskId: 't9', era }), (error: Error) => error.message.includes('task t9') && error.message.includes(`'${era}'`), era);
    }
  });

  it('each entry brings its codec and its upstream adapter, both naming its revision', () => {
    for (const revision of REVISIONS) {
      assert.equal(revision.codec.revision, revision.id);
      assert.equal(revision.upstream.revision, revision.id);
    }
  });

  it('the lists the layers below are handed derive from the registry, in its order', () => {
    assert.deepEqual(WIRE_CODECS, REVISIONS.map((r) => r.codec));
    assert.deepEqual(REVISION_IDS, REVISIONS.map((r) => r.id));
    assert.deepEqual(UPSTREAM_ADAPTERS, REVISIONS.map((r) => r.upstream));
    assert.deepEqual(SUPPORTED_VERSIONS, ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26']);
  });

  it('a request refused unread is answered in the revision its headers name, else in the last entry', () => {
    const endpointRevisions = REVISIONS.map((revision) => ({ ...revision, front: () => ({ post: () => Promise.reject(new Error('not called')) }) }));
    // A GatewayError whose HTTP status is below 400 shows the edges apart: the session revisions answer 500 (a
    // transport refusal must be an error status), 2026-07-28 keeps the registry's status.
    const error = new GatewayError('invalid_params', 'x');
    const rev2026Side = refusalFor(endpointRevisions, { 'mcp-protocol-version': '2026-07-28' })(null, error);
    const unnamed = refusalFor(endpointRevisions, {})(null, error);
    const session = refusalFor(endpointRevisions, { 'mcp-protocol-version': '2025-11-25' })(null, error);
    assert.equal(rev2026Side.status, error.httpStatus);
    assert.equal(unnamed.status, error.httpStatus >= 400 ? error.httpStatus : 500);
    assert.deepEqual(session, unnamed);
    assert.deepEqual(rev2026Side.body, unnamed.body);
  });
});
