// Forcing a full GC inside a measured node process through its inspector (started with --inspect on loopback)
// and reading its heap. RSS alone cannot show whether anything is retained per request: V8 grows its heap in
// steps and gives pages back lazily, so RSS after load looks like a leak even when nothing is kept.
import { request, WebSocket } from 'undici';

export interface HeapSample {
  /** V8 heap in use after a forced full GC: what is really retained. */
  usedBytes: number;
  totalBytes: number;
}

async function wsUrl(port: number): Promise<string> {
  const res = await request(`http://127.0.0.1:${port}/json/list`, { headersTimeout: 2000, bodyTimeout: 2000 });
  const targets = (await res.body.json()) as { webSocketDebuggerUrl?: string }[];
  const url = targets[0]?.webSocketDebuggerUrl;
  if (url === undefined) throw new Error(`no inspector target on port ${port}`);
  return url;
}

/** Runs two full GCs (the second catches what the first only made unreachable) and reads the heap usage. */
export async function gcAndMeasure(port: number, timeoutMs = 10_000): Promise<HeapSample> {
  const ws = new WebSocket(await wsUrl(port));
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const timer = setTimeout(() => {
    for (const p of pending.values()) p.reject(new Error(`inspector on port ${port} did not answer in ${timeoutMs} ms`));
    ws.close();
  }, timeoutMs);
  ws.addEventListener('message', (ev) => {
    const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: { message: string } };
    const p = msg.id !== undefined ? pending.get(msg.id) : undefined;
    if (!p || msg.id === undefined) return;
    pending.delete(msg.id);
    if (msg.error) p.reject(new Error(msg.error.message));
    else p.resolve(msg.result);
  });
  const call = (method: string): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method }));
    });
  try {
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve(), { once: true });
      ws.addEventListener('error', () => reject(new Error(`cannot connect to inspector on port ${port}`)), { once: true });
    });
    await call('HeapProfiler.collectGarbage');
    await call('HeapProfiler.collectGarbage');
    const usage = (await call('Runtime.getHeapUsage')) as { usedSize: number; totalSize: number };
    return { usedBytes: usage.usedSize, totalBytes: usage.totalSize };
  } finally {
    clearTimeout(timer);
    ws.close();
  }
}
