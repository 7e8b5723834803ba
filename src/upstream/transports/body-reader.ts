// Reading an upstream's HTTP response body with a bound. undici's body.text() keeps whatever comes; these stop at
// the bound and destroy the body, which aborts the request and closes its connection.
import { HEAD_BYTES, MessageTooLargeError } from './oversized.js';

/** What the body readers use of a response body: undici's Readable has it, and so has a POST's ResponseBody (post-response.ts). */
export interface BodyStream {
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  off(event: 'data', listener: (chunk: Buffer) => void): unknown;
  once(event: 'end' | 'close', listener: () => void): unknown;
  once(event: 'error', listener: (error: Error) => void): unknown;
  destroy(): unknown;
  readonly destroyed: boolean;
  pause(): unknown;
  resume(): unknown;
}

/**
 * The whole body as text, when it has at most `maxBytes` bytes (a `content-length` over it fails before
 * anything is read). Past it the body is destroyed and MessageTooLargeError says what its start was. A leading
 * byte-order mark is dropped, as undici's text() does.
 */
export function readBoundedText(body: BodyStream, maxBytes: number, contentLength?: string | string[]): Promise<string> {
  const declared = typeof contentLength === 'string' ? Number(contentLength) : Number.NaN;
  if (declared > maxBytes) {
    body.destroy();
    return Promise.reject(new MessageTooLargeError(maxBytes, ''));
  }
  return new Promise((resolve, reject) => {
    // Each chunk is decoded as it comes and let go: a body near the limit is held as its text, not as bytes and
    // text (and a joined copy of the bytes) at once.
    const decoder = new TextDecoder();
    let pieces: string[] = [];
    let bytes = 0;
    const onData = (chunk: Buffer): void => {
      if (bytes + chunk.length > maxBytes) {
        let head = '';
        for (const piece of pieces) {
          if (head.length >= HEAD_BYTES) break;
          head += piece.slice(0, HEAD_BYTES - head.length);
        }
        if (head.length < HEAD_BYTES) head += decoder.decode(chunk.subarray(0, HEAD_BYTES), { stream: true });
        pieces = [];
        body.off('data', onData);
        body.destroy();
        reject(new MessageTooLargeError(maxBytes, head.slice(0, HEAD_BYTES)));
        return;
      }
      pieces.push(decoder.decode(chunk, { stream: true }));
      bytes += chunk.length;
    };
    body.on('data', onData);
    body.once('error', reject);
    body.once('close', () => reject(new Error('the response body ended early')));
    body.once('end', () => {
      const text = pieces.join('') + decoder.decode();
      pieces = [];
      resolve(text);
    });
  });
}

/** The first `maxBytes` bytes of a body as text (an error page, for a message); the rest is not read. */
export function readBodyStart(body: BodyStream, maxBytes: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const done = (): void => resolve(new TextDecoder().decode(Buffer.concat(chunks).subarray(0, maxBytes)));
    body.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      bytes += chunk.length;
      if (bytes >= maxBytes) {
        body.destroy();
        done();
      }
    });
    body.once('end', done);
    body.once('error', done);
    body.once('close', done);
  });
}
