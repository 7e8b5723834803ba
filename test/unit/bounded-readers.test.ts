// The readers of upstream output that hold at most maxMessageBytes: lines (stdio), SSE events, JSON bodies, and
// what an over-long message's head tells about it. Fed real streams, split at every kind of place.
import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { readBoundedText } from '../../src/upstream/transports/body-reader.js';
import { LineSplitter } from '../../src/upstream/transports/line-splitter.js';
import { MessageTooLargeError, readHead, RESYNC_FACTOR } from '../../src/upstream/transports/oversized.js';
import { readSse, type SseEvent } from '../../src/upstream/transports/sse-reader.js';

/** `bytes` cut into pieces at the given offsets (sorted, deduplicated, within range). */
function cut(bytes: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((n) => n % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    if (point > from) pieces.push(bytes.subarray(from, point));
    from = point;
  }
  return pieces;
}

interface Split {
  lines: string[];
  overflows: { head: string; bytes?: number }[];
}

function split(pieces: Buffer[], maxLineBytes: number, crEndsLine: boolean, headChars?: number): Split {
  const result: Split = { lines: [], overflows: [] };
  const splitter = new LineSplitter(
    { maxLineBytes: () => maxLineBytes, crEndsLine, ...(headChars === undefined ? {} : { headChars }) },
    {
      line: (line, bytes) => {
        assert.equal(bytes, Buffer.byteLength(line));
        result.lines.push(line);
      },
      overflow: (head) => result.overflows.push({ head }),
      overflowEnded: (bytes) => {
        const last = result.overflows.at(-1);
        if (last !== undefined) last.bytes = bytes;
      },
    },
  );
  for (const piece of pieces) splitter.push(piece);
  splitter.end();
  return result;
}

describe('line splitter', () => {
  it('gives the same lines however the stream is cut, characters split between chunks included (LF, CRLF, and lone CR where CR ends lines)', () => {
    const line = fc.array(fc.constantFrom('a', 'z', '{', '}', '"', ':', ',', ' ', 'é', '€', '😀'), { maxLength: 40 }).map((chars) => chars.join(''));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 12 }), fc.constantFrom('\n', '\r\n', '\r'), fc.array(fc.nat(), { maxLength: 12 }), (lines, eol, at) => {
        const bytes = Buffer.from(lines.map((l) => l + eol).join(''), 'utf8');
        const got = split(cut(bytes, at), 1000, true);
        assert.deepEqual(got.lines, lines);
        assert.deepEqual(got.overflows, []);
        // Where only LF ends a line (JSON lines), a CR stays in it.
        const lfOnly = split(cut(bytes, at), 1000, false);
        if (eol === '\r') assert.deepEqual(lfOnly.lines, lines.length === 0 ? [] : [lines.map((l) => `${l}\r`).join('')]);
        else assert.deepEqual(lfOnly.lines, eol === '\n' ? lines : lines.map((l) => `${l}\r`));
      }),
    );
  });

  it('drops a line over the limit as it streams, reports its head and length, and goes on at the next line', () => {
    fc.assert(
      fc.property(fc.integer({ min: 11, max: 300 }), fc.array(fc.nat(), { maxLength: 20 }), (longBytes, at) => {
        const long = `{"id":1,"x":"${'é'.repeat(longBytes)}"}`;
        const bytes = Buffer.from(`short\n${long}\nüafter\n`);
        const got = split(cut(bytes, at), 10, false, 8);
        assert.deepEqual(got.lines, ['short', 'üafter']);
        assert.deepEqual(got.overflows, [{ head: long.slice(0, 8), bytes: Buffer.byteLength(long) }]);
      }),
    );
  });

  it('keeps at most the limit (plus one chunk) of a line that never ends, however long it runs', () => {
    let held = 0;
    const splitter = new LineSplitter(
      { maxLineBytes: () => 1024, crEndsLine: false },
      { line: () => assert.fail('no line ended'), overflow: (head) => (held = head.length), overflowEnded: () => assert.fail('it did not end') },
    );
    const chunk = Buffer.alloc(64 * 1024, 'x');
    for (let i = 0; i < 100; i++) splitter.push(chunk);
    assert.equal(splitter.overflowBytes, 100 * chunk.length);
    assert.ok(held <= 4096, `head of ${held} bytes`);
  });
});

describe('what the head of a dropped message tells', () => {
  it('names the call a response answers, whatever the key order, and an upstream request', () => {
    assert.deepEqual(readHead('{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"xxxx'), { kind: 'response', id: 42 });
    assert.deepEqual(readHead(' {"result" : {"a":[1,{"b":"}"}],"c":"x'), { kind: 'unknown' }); // id after the payload: not in the head
    assert.deepEqual(readHead('{"result":{"a":1},"jsonrpc":"2.0","id":"s-1"}'), { kind: 'response', id: 's-1' });
    assert.deepEqual(readHead('{"error":{"code":-1,"message":"m"},"id":7'), { kind: 'unknown' }); // 7 may go on: 70, 7e3
    assert.deepEqual(readHead('{"error":{"code":-1,"message":"m"},"id":7,'), { kind: 'response', id: 7 });
    assert.deepEqual(readHead('{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"x":"'), { kind: 'request', id: 3 });
    assert.deepEqual(readHead('{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xxxx'), { kind: 'unknown' });
    assert.deepEqual(readHead('not json xxxxxxxx'), { kind: 'unknown' });
    assert.deepEqual(readHead('{"jsonrpc":"2.0","id":{"nested":1},"result":{'), { kind: 'unknown' });
    assert.deepEqual(readHead('{"jsonrpc":"2.\\"0","id":5,"result":'), { kind: 'response', id: 5 });
  });
});

function body(pieces: (string | Buffer)[]): Readable {
  return Readable.from(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)), { objectMode: false });
}

async function sse(pieces: (string | Buffer)[], options: Parameters<typeof readSse>[2]): Promise<{ events: SseEvent[]; result: Awaited<ReturnType<typeof readSse>> }> {
  const events: SseEvent[] = [];
  const result = await readSse(body(pieces), (event) => events.push(event), options);
  return { events, result };
}

describe('SSE reader', () => {
  it('parses events the way the SSE spec says, however the stream is cut', async () => {
    const text = '\uFEFF: comment\nretry: 1500\nid: 1\nevent: message\ndata: {"a":\ndata:1}\n\nid: 2\ndata: é€😀\r\n\r\ndata\n\nevent: other\nid: 3\n\n: no data, no event\n\ndata: last without blank line';
    const bytes = Buffer.from(text, 'utf8');
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat(), { maxLength: 15 }), async (at) => {
        const { events, result } = await sse(cut(bytes, at), { maxEventBytes: 1000 });
        assert.deepEqual(events, [
          { id: '1', event: 'message', data: '{"a":\n1}' },
          { id: '2', event: undefined, data: 'é€😀' },
          { id: undefined, event: undefined, data: '' },
        ]);
        assert.equal(result.lastEventId, '3');
        assert.equal(result.retryMs, 1500);
        assert.equal(result.oversized, undefined);
      }),
    );
  });

  it('on a stream of its own, stops at an event over the limit and says what its data began with', async () => {
    const stream = new PassThrough();
    const events: SseEvent[] = [];
    const reading = readSse(stream, (event) => events.push(event), { maxEventBytes: 100 });
    stream.write('data: {"small":1}\n\n');
    stream.write(`data: {"jsonrpc":"2.0","id":9,"result":"${'x'.repeat(60)}`);
    stream.write(`${'x'.repeat(60)}`);
    const result = await reading;
    assert.deepEqual(events, [{ id: undefined, event: undefined, data: '{"small":1}' }]);
    assert.ok(result.oversized !== undefined && !result.oversized.endless);
    assert.deepEqual(readHead(result.oversized.head), { kind: 'response', id: 9 });
    assert.ok(stream.destroyed, 'the body was destroyed');
  });

  it('counts the whole event: many small data lines over the limit are as over-long as one', async () => {
    const { events, result } = await sse(['data: {"id":1,"result":\n', ...Array.from({ length: 30 }, () => 'data: 0123456789\n'), '\n'], { maxEventBytes: 200 });
    assert.deepEqual(events, []);
    assert.ok(result.oversized);
    assert.match(result.oversized.head, /^\{"id":1,"result":\n0123456789/);
  });

  it('on a shared stream, skips an over-long event to its end and reads on', async () => {
    const skipped: string[] = [];
    const { events, result } = await sse(
      ['data: before\n\n', 'event: message\ndata: {"id":4,"result":"', 'y'.repeat(500), '"}\ndata: more\n', ': comment\n\n', 'data: after\n\n'],
      { maxEventBytes: 100, skipOversized: (head) => skipped.push(head) },
    );
    assert.deepEqual(events.map((e) => e.data), ['before', 'after']);
    assert.equal(skipped.length, 1);
    assert.deepEqual(readHead(skipped[0] ?? ''), { kind: 'response', id: 4 });
    assert.equal(result.oversized, undefined);
  });

  it(`on a shared stream, gives up on an event still going after ${RESYNC_FACTOR} × the limit`, async () => {
    const stream = new PassThrough();
    const skipped: string[] = [];
    const reading = readSse(stream, () => assert.fail('no event'), { maxEventBytes: 1024, skipOversized: (head) => skipped.push(head) });
    stream.write('data: {"jsonrpc":"2.0","id":1,"result":"');
    const chunk = 'x'.repeat(4096);
    // Writes until the reader gives up (it destroys the stream); bounded in case it never did.
    for (let i = 0; i < 100 && !stream.destroyed; i++) {
      await new Promise<void>((resolve) => stream.write(chunk, () => resolve()));
    }
    const result = await reading;
    assert.ok(result.oversized?.endless, JSON.stringify(result.oversized));
    assert.equal(skipped.length, 1);
    assert.ok(stream.destroyed);
  });
});

describe('bounded body reader', () => {
  it('reads a body within the limit whole, across chunks, without its byte-order mark', async () => {
    const text = await readBoundedText(body(['\uFEFF{"a":', '"é', '€"}']), 100);
    assert.equal(text, '{"a":"é€"}');
  });

  it('refuses a body whose Content-Length is over the limit before reading it', async () => {
    const stream = new PassThrough();
    await assert.rejects(readBoundedText(stream, 100, '101'), (error: unknown) => error instanceof MessageTooLargeError && error.limit === 100);
    assert.ok(stream.destroyed);
  });

  it('stops a body that grows past the limit, destroying it, with its head', async () => {
    const stream = new PassThrough();
    const reading = readBoundedText(stream, 1000);
    stream.write('{"jsonrpc":"2.0","id":12,"result":"');
    stream.write('x'.repeat(2000));
    await assert.rejects(reading, (error: unknown) => error instanceof MessageTooLargeError && readHead(error.head).kind === 'response');
    assert.ok(stream.destroyed);
  });
});
