// The event seam: listeners and scope wrappers see what the core announces, and a failing or careless subscriber
// never costs the core its work.
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, it } from 'node:test';
import { GatewayEvents, type GatewayScopeMap } from '../../src/events.js';

function recordingLog(): { lines: string[]; error(fields: object, message: string): void } {
  const lines: string[] = [];
  return { lines, error: (_fields, message) => void lines.push(message) };
}

const request = (): GatewayScopeMap['upstream.request'] => ({ upstream: 'a', method: 'tools/call', carrier: {} });

describe('event seam: events', () => {
  it('delivers a payload to every listener until it unsubscribes', () => {
    const events = new GatewayEvents();
    const seen: string[] = [];
    const off = events.on('upstream.up', (e) => seen.push(`1:${e.upstream}`));
    events.on('upstream.up', (e) => seen.push(`2:${e.upstream}`));
    assert.equal(events.listened('upstream.up'), true);
    assert.equal(events.listened('upstream.down'), false);
    events.emit('upstream.up', { upstream: 'a', transport: 'stdio' });
    off();
    events.emit('upstream.up', { upstream: 'b', transport: 'stdio' });
    assert.deepEqual(seen, ['1:a', '2:a', '2:b']);
  });

  it('a listener that throws is logged; the others and the emitter go on', () => {
    const log = recordingLog();
    const events = new GatewayEvents(log);
    let reached = false;
    events.on('store.back', () => {
      throw new Error('boom');
    });
    events.on('store.back', () => void (reached = true));
    events.emit('store.back', { outageMs: 5 });
    assert.equal(reached, true);
    assert.deepEqual(log.lines, ['an event listener failed']);
  });
});

describe('event seam: scopes', () => {
  it('without wrappers a scope is the work itself', async () => {
    const events = new GatewayEvents();
    assert.equal(events.wrapped('upstream.request'), false);
    assert.equal(await events.scope('upstream.request', request(), async () => 42), 42);
  });

  it('wrappers nest (the last added outermost), run the work in their async context and read its outcome', async () => {
    const events = new GatewayEvents();
    const store = new AsyncLocalStorage<string>();
    const order: string[] = [];
    events.around('upstream.request', (info, next) => {
      order.push('inner');
      info.carrier.traceparent = '00-abc';
      return next();
    });
    events.around('upstream.request', (info, next) =>
      store.run('span', async () => {
        order.push('outer');
        const result = await next();
        order.push(`outcome:${info.outcome}`);
        return result;
      }),
    );
    const info = request();
    const result = await events.scope('upstream.request', info, async () => {
      order.push(`work:${info.carrier.traceparent}:${store.getStore()}`);
      info.outcome = 'ok';
      return 'done';
    });
    assert.equal(result, 'done');
    assert.deepEqual(order, ['outer', 'inner', 'work:00-abc:span', 'outcome:ok']);
  });

  it('the work starts in the same tick as the scope', () => {
    const events = new GatewayEvents();
    events.around('mcp.request', (_info, next) => next());
    let started = false;
    void events.scope('mcp.request', { method: 'ping', protocolVersion: '2025-11-25' }, async () => {
      started = true;
    });
    assert.equal(started, true);
  });

  it('a wrapper that throws or never starts the work cannot lose it', async () => {
    const log = recordingLog();
    const events = new GatewayEvents(log);
    const off = events.around('task.run', () => {
      throw new Error('boom');
    });
    const info = { taskId: 't', principal: 'p', tool: 'x', upstream: 'a', attempt: 1 };
    assert.equal(await events.scope('task.run', info, async () => 'ran'), 'ran');
    off();
    events.around('task.run', () => Promise.resolve('skipped') as Promise<never>);
    assert.equal(await events.scope('task.run', info, async () => 'ran'), 'ran');
    assert.deepEqual(log.lines, ['a scope subscriber failed', 'a scope subscriber did not start the work: started without it']);
  });

  it('the work runs once even when a wrapper calls next twice', async () => {
    const events = new GatewayEvents();
    events.around('task.run', async (_info, next) => {
      await next();
      return next();
    });
    let runs = 0;
    await events.scope('task.run', { taskId: 't', principal: 'p', tool: 'x', upstream: 'a', attempt: 1 }, async () => void runs++);
    assert.equal(runs, 1);
  });
});
