// Issue 39 finding 5 from outside: each request is served with its own token's rights (design invariant 13). One
// principal holds two access tokens, one down-scoped (`crm.read`) and one broader (`crm.read crm.write`); with
// tokenExchange the gateway used to cache the exchanged token per principal and exchange the principal's latest
// token, so a call made with the narrow token reached the upstream with the broad one's scopes. The protected
// upstream's whoami reports the scopes of the token each request arrived with.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { bearer } from '../helpers/auth-requests.js';
import { suiteScope } from '../helpers/harness.js';
import { identityGateway, GATEWAY_CLIENT, whoamiOf, type IdentityGateway } from '../helpers/identity-gateway.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';
import { TOKEN_EXCHANGE_GRANT, type AuthServer } from '../fixtures/auth-server.js';

const BROAD = 'crm.read crm.write';
const NARROW = 'crm.read';

describe('upstream identity: each request with its own token\'s rights', () => {
  const scope = suiteScope();
  let as: AuthServer;
  let gw: IdentityGateway;

  before(async () => {
    // No `scope` asked at the exchange: the exchanged token carries the subject token's own scopes.
    ({ as, gw } = await identityGateway(scope, (server) => ({ tokenExchange: { ...GATEWAY_CLIENT.config, tokenUrl: `${server.issuer}/token` } })));
  });

  test('2026-07-28: calls with either token reach the upstream with exactly that token\'s scopes, interleaved', async () => {
    const broad = await gw.token('alice', {}, { scope: BROAD });
    const narrow = await gw.token('alice', {}, { scope: NARROW });
    as.resetCounts();
    for (const [token, expected] of [[broad, BROAD], [narrow, NARROW], [broad, BROAD], [narrow, NARROW]] as const) {
      const answer = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(token) });
      const me = whoamiOf(answer.result);
      assert.equal(me.sub, 'alice');
      assert.equal(me.scope, expected, `a call made with the ${expected} token`);
    }
    // Concurrent calls with both tokens: still each its own.
    const both = await Promise.all(Array.from({ length: 20 }, (_, i) => {
      const [token, expected] = i % 2 === 0 ? [broad, BROAD] : [narrow, NARROW];
      return sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(token) }).then((a) => [whoamiOf(a.result).scope, expected]);
    }));
    for (const [seen, expected] of both) assert.equal(seen, expected);
    assert.deepEqual(as.tokenCounts().byGrant, { [TOKEN_EXCHANGE_GRANT]: 2 }, 'one exchange per token, each cached');
  });

  test('2025-11-25: each session\'s calls, and a task created with the narrow token, carry exactly their token\'s scopes', async () => {
    const broad = await gw.token('bob', {}, { scope: BROAD });
    const narrow = await gw.token('bob', {}, { scope: NARROW });
    const wide = await scope.plainClient(gw.gateway.url, { headers: bearer(broad) });
    const small = await scope.plainClient(gw.gateway.url, { headers: bearer(narrow) });
    const scopeOf = async (client: typeof wide) => whoamiOf(await client.callTool({ name: 'whoami', arguments: {} })).scope;
    assert.equal(await scopeOf(wide), BROAD);
    assert.equal(await scopeOf(small), NARROW, 'the broad token exchanged first is not served to the narrow one');
    assert.equal(await scopeOf(wide), BROAD, 'nor the narrow one to the broad');
    assert.equal(await scopeOf(small), NARROW);

    // The broad token was used last; a task the narrow session creates still runs with the narrow one.
    assert.equal(await scopeOf(wide), BROAD);
    const created = await small.request({ method: 'tools/call', params: { name: 'whoami', arguments: {}, task: {} } }, CreateTaskResultSchema);
    const result = await small.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    assert.equal(whoamiOf(result).scope, NARROW);
  });
});
