// What the bench's traced gateway exports to: an OTLP/HTTP endpoint on loopback that takes every batch and counts
// its spans, so the run can say tracing was really on. A collector would run on another machine; this one shares
// the bench's cores with the load generator, so it counts without parsing (a JSON.parse of every batch would be
// charged to the traced gateway's throughput).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpSink {
  /** The base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  url: string;
  spans(): number;
  close(): Promise<void>;
}

/** Every span of OTLP/JSON has one `"kind":` member, and nothing else has one (a string holding it is escaped). */
const SPAN_MARK = Buffer.from('"kind":');

function countSpans(body: Buffer): number {
  let n = 0;
  for (let at = body.indexOf(SPAN_MARK); at !== -1; at = body.indexOf(SPAN_MARK, at + SPAN_MARK.length)) n++;
  return n; // protobuf: counted as a batch without spans
}

export async function startOtlpSink(): Promise<OtlpSink> {
  let spans = 0;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/v1/traces') spans += countSpans(Buffer.concat(chunks));
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
