// A loopback HTTP proxy that records the request headers it forwards: put in front of an upstream fixture that does
// not report them (the 2026-07-28 stateless fixture), it shows what credentials the gateway sent with each request.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestScope } from './harness.js';

export interface RecordedRequest {
  method: string;
  /** The `mcp-method` header (2026-07-28), when present. */
  mcpMethod: string | undefined;
  headers: http.IncomingHttpHeaders;
}

export interface RecordingProxy {
  /** The upstream's URL through the proxy (same path). */
  url: string;
  /** Requests forwarded so far, oldest first (bounded). */
  readonly requests: readonly RecordedRequest[];
}

const MAX_RECORDED = 1000;

/** Forwards every request to `target`'s origin (path kept), streaming both ways; stopped with `scope`. */
export async function recordingProxy(scope: TestScope, target: string): Promise<RecordingProxy> {
  const upstream = new URL(target);
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const mcpMethod = req.headers['mcp-method'];
    requests.push({ method: req.method ?? '', mcpMethod: typeof mcpMethod === 'string' ? mcpMethod : undefined, headers: { ...req.headers } });
    if (requests.length > MAX_RECORDED) requests.shift();
    const forwarded = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: { ...req.headers, host: upstream.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  scope.defer(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  }));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}${upstream.pathname}`, requests };
}
