// The `helm test` pod's check (templates/tests/), run by the taskgate image's own node against the release's Service:
// /healthz, then an MCP 2025-11-25 session: initialize, notifications/initialized, tools/list. Any failure exits 1
// with what went wrong. test/chart runs this same file against a real gateway.
// Env: TASKGATE_URL (http://<service>:<port>), TASKGATE_MCP_PATH (/mcp), TASKGATE_API_KEY (when auth is on).
/* global fetch, AbortSignal, console */
import process from 'node:process';

const PROTOCOL_VERSION = '2025-11-25';
const base = process.env.TASKGATE_URL;
const mcpUrl = `${base}${process.env.TASKGATE_MCP_PATH || '/mcp'}`;
const apiKey = process.env.TASKGATE_API_KEY || undefined;
const TIMEOUT_MS = Number(process.env.TASKGATE_TEST_TIMEOUT_MS || 20000);

function headers(sessionId) {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION } : {}),
    ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
  };
}

/** The JSON-RPC answer with `id`, from a JSON body or from an SSE stream's `data:` lines. */
function answerIn(contentType, text, id) {
  const messages = contentType.includes('text/event-stream')
    ? text.split(/\r?\n\r?\n/).map((event) => event.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n')).filter((d) => d !== '').map((d) => JSON.parse(d))
    : [JSON.parse(text)];
  const answer = messages.flat().find((m) => m && m.id === id);
  if (answer === undefined) throw new Error(`no answer with id ${id} in: ${text.slice(0, 500)}`);
  if (answer.error) throw new Error(`JSON-RPC error ${answer.error.code}: ${answer.error.message}`);
  return answer.result;
}

async function post(body, sessionId) {
  const response = await fetch(mcpUrl, { method: 'POST', headers: headers(sessionId), body: JSON.stringify(body), signal: AbortSignal.timeout(TIMEOUT_MS) });
  const text = await response.text();
  if (!response.ok) throw new Error(`${body.method}: HTTP ${response.status}: ${text.slice(0, 500)}`);
  return { response, text };
}

async function main() {
  if (!base) throw new Error('TASKGATE_URL is not set');
  const health = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(TIMEOUT_MS) });
  if (!health.ok) throw new Error(`/healthz: HTTP ${health.status}`);
  console.log(`ok /healthz (${health.status})`);

  const init = await post({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'taskgate-helm-test', version: '1.0.0' } },
  });
  const initResult = answerIn(init.response.headers.get('content-type') ?? '', init.text, 1);
  const sessionId = init.response.headers.get('mcp-session-id');
  if (!sessionId) throw new Error('initialize: no Mcp-Session-Id header');
  console.log(`ok initialize: ${initResult.serverInfo?.name ?? '?'} ${initResult.serverInfo?.version ?? ''}, protocol ${initResult.protocolVersion}`);

  const initialized = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId);
  if (initialized.response.status !== 202) throw new Error(`notifications/initialized: HTTP ${initialized.response.status}, expected 202`);

  const list = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, sessionId);
  const tools = answerIn(list.response.headers.get('content-type') ?? '', list.text, 2).tools;
  if (!Array.isArray(tools)) throw new Error('tools/list: no tools array in the result');
  console.log(`ok tools/list: ${tools.length} tools${tools.length > 0 ? ` (${tools.slice(0, 5).map((t) => t.name).join(', ')}${tools.length > 5 ? ', ...' : ''})` : ''}`);

  // End the session rather than leave it to the idle timeout.
  await fetch(mcpUrl, { method: 'DELETE', headers: headers(sessionId), signal: AbortSignal.timeout(TIMEOUT_MS) }).catch(() => undefined);
}

main().then(
  () => console.log('taskgate helm test passed'),
  (error) => {
    console.error(`taskgate helm test FAILED: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);
