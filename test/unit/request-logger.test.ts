// The request's logger stand-in (src/http/request-logger.ts): nothing is made for a line whose level is off, a line
// that is on carries the request's bindings as fastify's own child would, and the stand-in behaves as a logger.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { pino } from 'pino';
import { lazyRequestLogger } from '../../src/http/request-logger.js';

function capture(level: string): { logger: FastifyBaseLogger; lines: Record<string, unknown>[]; children: () => number } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const logger = pino({ level }, sink) as unknown as FastifyBaseLogger;
  let made = 0;
  // pino's children inherit from their parent, this override included: `this` keeps each one's own bindings.
  const child = logger.child;
  logger.child = function (this: FastifyBaseLogger, ...args: Parameters<FastifyBaseLogger['child']>) {
    made++;
    return child.apply(this, args);
  };
  return { logger, lines, children: () => made };
}

describe('request logger', () => {
  it('makes no child for lines below the level, and one (with the bindings) for the first line that is on', () => {
    const { logger, lines, children } = capture('info');
    const log = lazyRequestLogger(logger, { reqId: 'req-1' }, {});
    log.debug({ detail: 1 }, 'not written');
    log.trace('not written either');
    assert.equal(children(), 0);
    log.warn({ err: 'x' }, 'written');
    log.info('again');
    assert.equal(children(), 1);
    assert.deepEqual(lines.map((l) => [l.reqId, l.msg]), [['req-1', 'written'], ['req-1', 'again']]);
  });

  it('is a logger: its level is the parent\'s until set, child() nests the bindings', () => {
    const { logger, lines } = capture('info');
    const log = lazyRequestLogger(logger, { reqId: 'req-2' }, {});
    assert.equal(log.level, 'info');
    log.child({ part: 'inner' }).error('nested');
    assert.deepEqual([lines[0]?.reqId, lines[0]?.part, lines[0]?.msg], ['req-2', 'inner', 'nested']);
    log.level = 'debug';
    log.debug('now on');
    assert.equal(lines.at(-1)?.msg, 'now on');
    assert.equal(logger.level, 'info', 'the parent keeps its level');
  });

  it('honours a route\'s own level at once', () => {
    const { logger, lines, children } = capture('info');
    const log = lazyRequestLogger(logger, { reqId: 'req-3' }, { level: 'debug' });
    assert.equal(children(), 1);
    log.debug('route debug');
    assert.equal(lines.at(-1)?.msg, 'route debug');
  });
});
