// Resource rules are matched on what a URI means, not on how it is spelled (issue 39, finding 6), from outside: a
// gateway process in front of a file server as such servers are written (test/fixtures/names-server.ts --files:
// it decodes a URI and resolves its dot segments, so `file:///public/%2e%2e/etc/passwd` is /etc/passwd to it),
// real SDK clients (2025-11-25) and hand-written 2026-07-28 requests. The probe spellings of a path that
// `resources.exclude` hides, or that an `auth.access` resource glob does not grant, are refused (never rewritten)
// and reach no upstream, for resources/read, resources/subscribe and completion references; template reads of
// what the rules allow still work.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeArgs, REPO_ROOT, type GatewayChild } from '../fixtures/spawn.js';
import { suiteScope, type TestScope } from '../helpers/harness.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';

const NAMES_FIXTURE = join(REPO_ROOT, 'test/fixtures/names-server.ts');
const ALICE_KEY = 'alice-key-0123456789abcdef';
const BOB_KEY = 'bob-key-0123456789abcdef-bob';

/** The probe's spellings of `path` below `file:///public/` (or of the path itself), each of which the server resolves to it. */
function spellings(path: string): string[] {
  const [first = '', ...rest] = path.split('/');
  const encodedFirst = `%${first.charCodeAt(0).toString(16)}${first.slice(1)}`;
  return [
    `file:///${encodedFirst}/${rest.join('/')}`,
    `file:///public/../${path}`,
    `file:///public/%2e%2e/${path}`,
    `file:///public/%2E%2E%2F${path}`,
    `file:///public/..%2f${path}`,
    `file:///public/..%2F${path}`,
    `file:///public/./../${path}`,
    `FILE:///${path}`,
  ];
}

async function clientWithKey(scope: TestScope, url: string, key: string): Promise<Client> {
  const client = new Client({ name: 'resource-rules-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  scope.defer(() => client.close());
  return client;
}

/** What the file server was asked to read (its own record), through the gateway. */
async function readsAt(client: Client): Promise<string[]> {
  const { names } = (await client.callTool({ name: 'files__received', arguments: {} })).structuredContent as { names: string[] };
  return names.filter((name) => /^file:/i.test(name));
}

describe('resource rules and URI spellings', () => {
  const scope = suiteScope();
  let gateway: GatewayChild;
  let alice: Client;
  let bob: Client;

  before(async () => {
    gateway = await scope.spawnGateway({
      config: {
        upstreams: {
          files: {
            transport: 'stdio',
            command: process.execPath,
            args: [...nodeArgs(NAMES_FIXTURE), '--lookup', 'strict', '--files'],
            cwd: REPO_ROOT,
            isolation: 'shared',
            prefix: 'files__',
            resources: { exclude: ['file:///etc/*'] },
          },
        },
        auth: {
          resource: 'http://gateway.example/mcp',
          apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'bob', key: BOB_KEY }],
          access: [
            // bob may read anything the selection exposes: only resources.exclude stands between him and /etc.
            { principals: ['bob'], tools: ['*'], resources: ['*'] },
            // alice may read only below /public.
            { principals: ['alice'], tools: ['*'], resources: ['file:///public/*'] },
          ],
        },
      },
    });
    alice = await clientWithKey(scope, gateway.url, ALICE_KEY);
    bob = await clientWithKey(scope, gateway.url, BOB_KEY);
  });

  test('resources.exclude: no spelling of an excluded path is read, subscribed or completed, in either revision', async () => {
    const probes = spellings('etc/passwd');
    for (const uri of ['file:///etc/passwd', ...probes]) {
      await assert.rejects(bob.readResource({ uri }), /Resource not found/, `read ${uri}`);
      await assert.rejects(bob.subscribeResource({ uri }), /Resource not found/, `subscribe ${uri}`);
      await assert.rejects(bob.complete({ ref: { type: 'ref/resource', uri }, argument: { name: 'path', value: '' } }), /Resource not found/, `complete ${uri}`);
      const answer = await sendRev2026(gateway.url, 'resources/read', { uri }, { headers: { authorization: `Bearer ${BOB_KEY}` } });
      assert.equal(answer.error?.message, `Resource not found: ${uri}`, `2026-07-28 read ${uri}: ${JSON.stringify(answer.response)}`);
    }
    const read = await readsAt(bob);
    assert.deepEqual(read.filter((uri) => uri.includes('etc')), [], 'the upstream was asked for none of them');
  });

  test('auth.access: no spelling of a path outside the granted glob is read by the principal it does not grant', async () => {
    for (const uri of ['file:///private/key', ...spellings('private/key')]) {
      await assert.rejects(alice.readResource({ uri }), /Resource not found/, `read ${uri}`);
      await assert.rejects(alice.subscribeResource({ uri }), /Resource not found/, `subscribe ${uri}`);
      const answer = await sendRev2026(gateway.url, 'resources/read', { uri }, { headers: { authorization: `Bearer ${ALICE_KEY}` } });
      assert.equal(answer.error?.message, `Resource not found: ${uri}`, `2026-07-28 read ${uri}: ${JSON.stringify(answer.response)}`);
    }
    assert.deepEqual((await readsAt(alice)).filter((uri) => uri.includes('private')), [], 'the upstream was asked for none of them');
  });

  test('what the rules allow is still read, through a listed URI and through the templates', async () => {
    assert.match(JSON.stringify((await alice.readResource({ uri: 'file:///public/notes.txt' })).contents), /file \/public\/notes\.txt/);
    assert.match(JSON.stringify((await alice.readResource({ uri: 'file:///public/docs/guide.md' })).contents), /file \/public\/docs\/guide\.md/);
    assert.match(JSON.stringify((await alice.readResource({ uri: 'file:///public/a%20b.txt' })).contents), /file \/public\/a b\.txt/);
    assert.match(JSON.stringify((await bob.readResource({ uri: 'file:///private/key' })).contents), /file \/private\/key/, 'the template outside the exclusion');
    const rev2026Read = await sendRev2026(gateway.url, 'resources/read', { uri: 'file:///public/docs/guide.md' }, { headers: { authorization: `Bearer ${ALICE_KEY}` } });
    assert.match(JSON.stringify(rev2026Read.result), /file \/public\/docs\/guide\.md/);
    const lists = (await alice.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    assert.deepEqual(lists, ['file:///public/{+path}'], 'alice sees the template her glob grants');
  });
});
