// What the bench's traced gateway exports to: an OTLP/HTTP endpoint on loopback that takes every batch and counts
// its spans, so the run can say tracing was really on (a collector would run elsewhere; this one costs the bench
// process a JSON parse per batch).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpSink {
  /** The base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  url: string;
  spans(): number;
  close(): Promise<void>;
}

function countSpans(body: string): number {
  try {
    const parsed = JSON.parse(body) as { resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[] };
    let n = 0;
    for (const resource of parsed.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) n += scope.spans?.length ?? 0;
    return n;
  } catch {
    return 0; // protobuf or garbage: counted as a batch without spans
  }
}

export async function startOtlpSink(): Promise<OtlpSink> {
  let spans = 0;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/v1/traces') spans += countSpans(Buffer.concat(chunks).toString('utf8'));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
