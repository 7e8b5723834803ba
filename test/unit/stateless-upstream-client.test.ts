import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, it } from 'node:test';
import { Agent } from 'undici';
import { createLogger } from '../../src/log.js';
import { StatelessUpstreamClient } from '../../src/protocol/rev2026-07-28/upstream/client.js';

// The deadline is a timer of the client's own: on Node 20 an AbortSignal.timeout composed with AbortSignal.any is
// held weakly and, once collected, never fires (seen in a plain script). A collection in the middle of the wait
// makes sure the deadline hangs on no such reference.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

describe('2026-07-28 upstream client', () => {
  it('a request past its timeoutMs ends with a clear error, even when garbage is collected meanwhile', { timeout: 10_000 }, async () => {
    const held: ServerResponse[] = [];
    const server = createServer((_request, response) => void held.push(response)); // never answers
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const agent = new Agent();
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
      const client = new StatelessUpstreamClient({
        upstreamName: 'silent',
        url,
        headers: {},
        agent,
        logger: createLogger({ level: 'silent' }, { pretty: false }),
        clientInfo: { name: 'test', version: '1' },
        maxMessageBytes: 16 * 1024 * 1024,
      });
      const pending = client.request('resources/read', { uri: 'test://x', _meta: client.ownEnvelope() }, { timeoutMs: 400 });
      setTimeout(gc, 100);
      const outcome = await pending;
      assert.ok('error' in outcome, JSON.stringify(outcome));
      assert.match(outcome.error.message, /Upstream 'silent' did not answer resources\/read within 400 ms/);
    } finally {
      for (const response of held) response.destroy();
      await agent.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
