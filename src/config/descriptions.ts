// What every config key means, keyed by its dotted path (`upstreams.<name>.url`, `tasks.rules[].match`). Kept apart
// from schema.ts so the schema stays readable; scripts/config-doc.ts joins the two while walking the schema, and a
// unit test fails when a key has no description here or a description names no key. Text is Markdown; line breaks
// inside a string are reflowed. These are what operators read in docs/configuration.md: say what the key does, its
// units and special values, and what happens at the limit.
import { DEFAULT_POLICY, PolicyDefaultsSchema, RateLimitsSchema } from './schema.js';

const POLICY_KEYS = Object.keys(PolicyDefaultsSchema.shape);
const RATE_KEYS = Object.keys(RateLimitsSchema.shape).filter((key) => key !== 'rules');

/** One entry per key of a shape that repeats elsewhere (a rule's fields are the defaults' fields). */
function byKey(keys: readonly string[], parent: string, text: (key: string) => string): Record<string, string> {
  return Object.fromEntries(keys.map((key) => [`${parent}.${key}`, text(key)]));
}

export const CONFIG_DESCRIPTIONS: Readonly<Record<string, string>> = {
  listen: 'Where clients connect: the HTTP front end and its bounds. The MCP endpoint is `http://<host>:<port><path>`.',
  'listen.host': `Bind address. On a loopback address only local clients reach the gateway, and Host and Origin are
    checked against DNS rebinding (see \`allowedHosts\`, \`allowedOrigins\`). Without \`auth\`, binding beyond loopback
    is warned about.`,
  'listen.port': 'TCP port; 0 lets the system pick a free one. `TASKGATE_PORT` overrides it.',
  'listen.path': `The MCP endpoint (POST, GET, DELETE): starts with \`/\`, no spaces, query or fragment. Must differ
    from \`/healthz\`, \`/readyz\`, \`metrics.path\` and \`dashboard.path\`.`,
  'listen.maxBodyBytes': 'Largest request body; a larger one gets HTTP 413.',
  'listen.maxBatchSize': 'Most messages in one JSON-RPC batch (2025-03-26 sessions only); more: HTTP 400.',
  'listen.maxJsonDepth': 'Deepest nesting of arrays and objects in a request body; deeper: HTTP 400 (-32600).',
  'listen.requestTimeoutMs': `A request's headers and body must have arrived within this, else HTTP 408 and the
    connection closes. Only the request's arrival is timed, never a long answer.`,
  'listen.headersTimeoutMs': 'The headers alone must have arrived within this; at most `listen.requestTimeoutMs`.',
  'listen.maxConnections': `Client connections open at once. From 90% of it, idle keep-alive connections are closed to
    make room (with auth, those that never presented valid credentials first; then the longest idle); a newcomer is
    closed only when none can go. 0 = unlimited.`,
  'listen.maxConnectionsPerAddress': `Connections open at once from one remote address; more are closed as they
    arrive. 0 = unlimited.`,
  'listen.keepAliveTimeoutMs': `A keep-alive connection without a request for this long is closed (Node's default;
    fastify alone would keep it 72 s).`,
  'listen.maxInflightBytes': `Bytes of request bodies held at once, from reading a body until the gateway lets go of
    what it carried (a forwarded call: its answer; a task: the end of its upstream call). Past it a new request gets
    HTTP 503, \`Retry-After: 5\` and a -32001 error naming the budget; running calls go on. 0 = unlimited; else at
    least 2 × \`listen.maxBodyBytes\`.`,
  'listen.maxInflightBytesPerPrincipal': `The same as \`listen.maxInflightBytes\`, per principal (without auth: all
    clients together). In both budgets, requests over 64 KiB may not use the last eighth, so polls, task reads and
    cancels still pass. 0 = unlimited; else at least 2 × \`listen.maxBodyBytes\`.`,
  'listen.allowedOrigins': `More \`Origin\` values accepted, each exactly \`scheme://host[:port]\` (\`"*"\` = any).
    Empty: loopback origins when bound to loopback, else any. Origins in \`listen.cors.origins\` pass too.`,
  'listen.allowedHosts': `More \`Host\` values accepted (host or host:port, not a URL; compared case-insensitively);
    loopback names always are. Empty: loopback names only when bound to loopback, else any.`,
  'listen.cors': `CORS for browser pages on other origins. Absent (the default): no CORS, so pages on other origins
    cannot read any answer.`,
  'listen.cors.origins': `Pages allowed to call the MCP endpoint: exact origins, \`"*"\`, or globs (\`*.\` = one or
    more leftmost labels, \`:*\` = any port), e.g. \`["https://ide.example.com", "https://*.example.dev",
    "http://localhost:*"]\`. They pass the Origin guard too, whatever \`listen.allowedOrigins\` says; Host is still
    checked. Another origin gets no CORS headers, so its browser refuses the answer (fetch rejects).`,
  'listen.cors.credentials': `Send \`Access-Control-Allow-Credentials\`, for cookies or TLS client certificates in front
    of the gateway; an \`Authorization\` header needs none. \`true\` refuses \`"*"\` in \`origins\` at load.`,
  'listen.cors.maxAgeSeconds': `How long a browser keeps a preflight's answer (browsers cap it themselves: Chromium at
    7200).`,

  store: `Where tasks, 2025-era sessions, leases and the replicas' shared state live. \`memory\` is embedded and lives
    as long as the process (one replica only); \`redis\` is durable and shared by any number of replicas.
    \`TASKGATE_REDIS_URL\` replaces the section with \`{ type: redis, url: <its value> }\`, keeping \`prefix\` and \`commandTimeoutMs\`.`,
  'store.type': 'Which store: `memory` or `redis`.',
  'store.url': `The Redis server: \`redis://[user:password@]host:port[/db]\`, or \`rediss://\` for TLS. Unused with
    \`sentinel\` or \`cluster\`.`,
  'store.prefix': `Prefix of every Redis key and channel. Replicas serving one gateway share it; gateways that share a
    Redis keep apart by it.`,
  'store.commandTimeoutMs': `How long a Redis command may go unanswered on a live connection before the request it
    serves fails with "the task store is slow" (HTTP 503 + \`Retry-After\` for 2026-07-28 clients) instead of waiting
    on a blocked or overloaded Redis. Long enough for the slowest script under load; far below a client's own timeout.`,
  'store.sentinel': `A Sentinel-managed primary instead of \`url\` (ioredis' own Sentinel support); not together with
    \`cluster\`. A task's creation and its end are acknowledged once a replica has them (\`WAIT 1\`, at most 500 ms).`,
  'store.sentinel.name': "The primary's name as the sentinels monitor it (`sentinel monitor <name> ...`).",
  'store.sentinel.nodes': 'The sentinels: `redis://host:port` (`rediss://` turns TLS on).',
  'store.sentinel.username': 'Username for the primary and its replicas.',
  'store.sentinel.password': 'Password for the primary and its replicas (use `${ENV}`; `check-config` hides it).',
  'store.sentinel.tls': `TLS to the primary and its replicas: \`true\`, or node's TLS options (\`ca\`, \`cert\`,
    \`key\`,
    \`servername\`, \`rejectUnauthorized\`, ...), handed to ioredis as they are.`,
  'store.sentinel.sentinelUsername': 'Username for the sentinels themselves.',
  'store.sentinel.sentinelPassword': 'Password for the sentinels themselves.',
  'store.cluster': `A Redis Cluster (or Valkey) instead of \`url\`; not together with \`sentinel\`. Every Lua script
    touches the keys of one slot; replica messages use sharded pub/sub.`,
  'store.cluster.nodes': `Any of the cluster's nodes, \`redis://host:port\` (\`rediss://\` turns TLS on); the rest are
    discovered.`,
  'store.cluster.username': 'Username for the cluster nodes.',
  'store.cluster.password': 'Password for the cluster nodes (use `${ENV}`; `check-config` hides it).',
  'store.cluster.tls': `TLS to the nodes: \`true\`, or node's TLS options (\`ca\`, \`cert\`, \`key\`, \`servername\`,
    \`rejectUnauthorized\`, ...), handed to ioredis as they are.`,

  upstreams: `The MCP servers behind the gateway, by name: letters, digits, \`_\` and \`-\`. At least one. The name
    appears in logs and errors and makes the default prefix; lists come back in file order.`,
  'upstreams.<name>': `One upstream: a \`stdio\` child process, a Streamable HTTP server or a legacy HTTP+SSE server.
    A key that belongs to another transport is an error that names the transport it belongs to.`,
  'upstreams.<name>.transport': 'How the gateway reaches the server.',
  'upstreams.<name>.prefix': `Put before each of its tool and prompt names as exposed: letters, digits, \`_\`, \`-\`,
    \`.\` and \`/\`. Adding or removing an upstream changes the default; write it out to keep names stable.`,
  'upstreams.<name>.tools': `Which of its tools the upstream exposes, and under what names (every transport). Absent:
    every tool under its own name. A tool left out is absent from lists and answered like an unknown tool (-32602
    \`Unknown tool: <name>\`) without reaching the upstream.`,
  'upstreams.<name>.tools.include': `Globs (\`*\` any run of characters, \`?\` one) on the upstream's own tool names,
    before prefix and rename: only tools that match are exposed. Absent: every tool.`,
  'upstreams.<name>.tools.exclude': 'Globs of tools left out, as in `include`; wins over `include`.',
  'upstreams.<name>.tools.overrides': `A new name, title or description per tool, keyed by the upstream's own tool
    name.`,
  'upstreams.<name>.tools.overrides.<tool>': `What changes for the tool the upstream calls \`<tool>\`. An override
    naming a tool the upstream does not list is reported by \`check-config --tools\`.`,
  'upstreams.<name>.tools.overrides.<tool>.name': `A tool name (1-128 letters, digits, \`_\`, \`-\`, \`.\` or \`/\`),
    exposed as \`<prefix><name>\` instead: clients list and call only that name (the old one is unknown), task rules
    and access rules match it, and tasks report it. Two tools may not end up with one name.`,
  'upstreams.<name>.tools.overrides.<tool>.title': "The title clients see instead of the upstream's.",
  'upstreams.<name>.tools.overrides.<tool>.description': `The description clients (and models) see instead of the
    upstream's.`,
  'upstreams.<name>.prompts': `Which prompts the upstream exposes, by prompt name. Absent: every prompt. \`prompts/get\`
    of a left-out one: \`Unknown prompt: <name>\`.`,
  'upstreams.<name>.prompts.include': `Globs on the upstream's prompt names: only prompts that match are exposed.
    Absent: every prompt.`,
  'upstreams.<name>.prompts.exclude': 'Globs of prompts left out; wins over `include`.',
  'upstreams.<name>.resources': `Which resources the upstream exposes, by resource URI, and by \`uriTemplate\` text for
    templates, both compared in RFC 3986 normal form (scheme and host without case, \`%65\` as \`e\`, dot segments
    resolved). Absent: every resource. Reading a left-out URI (or one only a left-out template matches):
    \`Resource not found\`.`,
  'upstreams.<name>.resources.include': `Globs on resource URIs and template texts: only those that match are exposed.
    Absent: all.`,
  'upstreams.<name>.resources.exclude': `Globs of resources and templates left out, e.g. \`file:///etc/*\`; wins over
    \`include\`.`,
  'upstreams.<name>.requestTimeoutMs': `Deadline for everything but \`tools/call\` (lists, reads, prompts, completion).
    0 = none.`,
  'upstreams.<name>.initializeTimeoutMs': `Deadline for the handshake of every connection to the upstream
    (\`initialize\`, and \`server/discover\` on Streamable HTTP). An upstream that has not answered by then counts as
    down and is retried with backoff (a stdio child is stopped first); the gateway serves meanwhile. At start, lists
    and \`initialize\` wait for the upstream's first attempt at most this long.`,
  'upstreams.<name>.taskConcurrency': `Tasks running on this upstream at once; more wait, queued in order. 0 =
    unlimited.`,
  'upstreams.<name>.maxMessageBytes': `Largest message taken from the upstream, on every transport: a stdio line, an SSE
    event, a JSON body. A larger one is dropped as it streams and the call it answers fails: -32603 \`Upstream
    '<name>' sent a message larger than maxMessageBytes (<n> bytes)\` (a task fails with that message). Raise it for
    tools with big results; a task's result is also bounded by \`tasks.maxResultBytes\` when it is stored.`,
  'upstreams.<name>.maxSessions': `Connections of a client session's own this replica keeps to the upstream at once: HTTP
    upstream sessions (\`Mcp-Session-Id\`, one per client session that reached the upstream here, and one per
    principal of the 2026-07-28 clients where \`auth\` tells callers apart), children of a
    \`per-session\` stdio upstream, and of a \`per-principal\` one, whose children it caps (one per principal). At
    the bound the least recently used idle one (no call running on it) is closed (ended with DELETE; its client gets a
    new one on its next request), and when every one is busy a new client session's request fails: -32603
    \`Upstream '<name>' has no session to spare\` (per-principal: \`… has no child process to spare for another
    principal: its cap of <n> children …\`). A busy one is never closed for another. 0 = unbounded. Each child is a
    process: on a per-principal upstream, set it to what the machine can run.`,
  'upstreams.<name>.command': 'The program to start as the server, e.g. `node`.',
  'upstreams.<name>.args': 'Its arguments. Numbers and booleans are taken as text.',
  'upstreams.<name>.env': `Variables added to a minimal environment (HOME, PATH, USER, LANG, TMPDIR, ...): the
    gateway's own variables (Redis URL, tokens) are not passed to children. With \`isolation: per-principal\` a value
    may name the child's caller, filled in when the child starts (unlike \`\${ENV}\`, read once at load):
    \`{{principal}}\` (the qualified principal, \`key:<name>\` or \`oauth:<issuer>#<sub>\`; empty for the anonymous
    principal), \`{{claims.<claim>}}\` (a verified claim of the caller's token; arrays joined by \`,\`, empty when
    absent) and \`{{upstreamToken}}\` (the token of this upstream's \`auth\` for the caller). E.g.
    \`GITHUB_TOKEN: "{{upstreamToken}}"\`. What is filled in loses CR, LF and NUL, may be at most 16384 characters (a
    longer one fails the call, naming the variable), and is never logged. There, every \`{{…}}\` is a placeholder
    (an unknown one is refused at load); in a \`shared\` or \`per-session\` upstream these placeholders are
    refused at load (its child serves several principals), and other \`{{…}}\` text is taken as it is.`,
  'upstreams.<name>.cwd': "The child's working directory. Absent: the gateway's.",
  'upstreams.<name>.isolation': `\`shared\`: one child process serves all sessions (request ids and progress tokens are
    rewritten so clients cannot collide). \`per-session\`: one child per client session, started on first use and
    stopped when the session ends; use it for servers that ask the client for input or keep per-client state.
    \`per-principal\`: one child per principal, started on its first call, shared by all its sessions and clients,
    stopped after \`idleTimeoutMs\` without a call and capped by \`maxSessions\`; its \`env\` may name the caller
    (\`{{principal}}\`, \`{{claims.<claim>}}\`, \`{{upstreamToken}}\`), so a local server that reads e.g.
    \`GITHUB_TOKEN\` acts as its caller. Without \`auth\` on the gateway every caller is the one anonymous principal
    (one child). No child ever runs without a principal: such an upstream is ready at start with no child, and its
    lists are read from its principals' children.`,
  'upstreams.<name>.idleTimeoutMs': `How long a principal's own connection to the upstream may have no call running
    before it is closed (checked a few times per period: it goes between this and 1.5 × this after its last call;
    never while a call runs); the principal's next call opens a new one. 0 = never. stdio: a \`per-principal\`
    child, stopped. HTTP: where \`auth\` tells callers apart (\`tokenExchange\`, \`signedIdentity\`,
    \`claimHeaders\`), the upstream session of one principal's 2026-07-28 clients, ended (Streamable HTTP: with
    DELETE). A client session's own upstream session is not: it ends with its client session.`,
  'upstreams.<name>.restart': 'Backoff for restarting the child when it dies (or cannot be started).',
  'upstreams.<name>.restart.initialDelayMs': `Delay before the first restart; each further one doubles it. A child that
    stayed up a while starts again from this.`,
  'upstreams.<name>.restart.maxDelayMs': 'The longest delay between restarts; at least `initialDelayMs`.',
  'upstreams.<name>.stopGraceMs': `The child runs in a process group of its own; to stop it (shutdown, reload removal,
    restart, a handshake that timed out) the gateway closes its stdin and sends SIGTERM to the group, then SIGKILL
    after this long if any process of the group is left. Shutdown waits until the group is gone.`,
  'upstreams.<name>.url': `The server's http(s) URL: its MCP endpoint for \`streamable-http\`, its SSE endpoint for
    \`sse\`.`,
  'upstreams.<name>.headers': `HTTP headers (values without control characters) sent with every request to the upstream,
    e.g. \`{ Authorization: "Bearer \${CI_TOKEN}" }\`. A client's own credentials never reach an upstream: give it its
    own here.`,
  'upstreams.<name>.auth': `How the gateway authenticates to this upstream beyond \`headers\` (HTTP upstreams; on a stdio
    upstream only with \`isolation: per-principal\`, where its token for the caller is \`{{upstreamToken}}\` in \`env\`,
    \`resource\` (\`audience\` for signedIdentity) is required and \`claimHeaders\` is refused): at most one of \`clientCredentials\`, \`tokenExchange\`, \`signedIdentity\`, and
    \`claimHeaders\` with any or alone. What the gateway asks on its own behalf (handshake, lists) goes under its own
    identity; a caller's calls under the caller's. A setting asking to forward the client's own token
    (\`auth: passthrough\`, \`forwardToken\`, ...) is refused at load: the MCP authorization spec forbids token
    passthrough. The \`Authorization\` this sets wins over one in \`headers\`.`,
  'upstreams.<name>.auth.clientCredentials': `The gateway is the upstream's OAuth client (RFC 6749 client credentials):
    one token for every caller, cached until shortly before it expires.`,
  'upstreams.<name>.auth.clientCredentials.clientId': 'The gateway\'s client id at the upstream\'s authorization server.',
  'upstreams.<name>.auth.clientCredentials.clientSecret': 'Its client secret (use `${ENV}`); redacted by `check-config`, never logged.',
  'upstreams.<name>.auth.clientCredentials.tokenUrl': `The token endpoint, used as it is. Absent: read from \`issuer\`'s metadata, or
    discovered as an MCP client does, from the upstream's 401 \`WWW-Authenticate: Bearer resource_metadata=…\` (or its
    \`/.well-known/oauth-protected-resource\`), RFC 9728 metadata, then the authorization server's RFC 8414 metadata
    (OpenID Connect discovery as a fallback); a discovered server is used only when \`trustedIssuers\` or
    \`auth.oauth.issuer\` names it.`,
  'upstreams.<name>.auth.clientCredentials.issuer': `The authorization server's issuer: its token endpoint is read from its own RFC 8414
    (or OpenID Connect) metadata, and the upstream is not asked where to go. Not with \`tokenUrl\`.`,
  'upstreams.<name>.auth.clientCredentials.trustedIssuers': `Issuers an authorization server found by discovery may have; the first
    the upstream names that is listed is used. \`auth.oauth.issuer\` is trusted as well (it already vouches for every
    caller). A server the upstream names that is neither gets nothing, not even a request: the call fails with \`cause: untrusted_server\`, naming it. Not with \`tokenUrl\` or
    \`issuer\`. Without any of the three and without \`auth.oauth\`, refused at load.`,
  'upstreams.<name>.auth.clientCredentials.resource': 'RFC 8707 `resource` asked for: the upstream\'s URL unless given.',
  'upstreams.<name>.auth.clientCredentials.scope': 'Space-separated scopes asked for. Absent: none (the server\'s default).',
  'upstreams.<name>.auth.clientCredentials.tokenEndpointAuthMethod': `How the client authenticates to the token endpoint: HTTP
    Basic (\`client_secret_basic\`) or form fields (\`client_secret_post\`).`,
  'upstreams.<name>.auth.tokenExchange': `RFC 8693 token exchange: the caller's verified access token is the
    \`subject_token\`, exchanged for a token for the upstream, cached per caller's token (under a hash of it): each request is served with its own token's rights. A caller without one (an API-key
    principal) gets an error naming the upstream; needs \`auth.oauth\`. The gateway's own requests use client credentials
    of the same client.`,
  'upstreams.<name>.auth.tokenExchange.clientId': 'The gateway\'s client id at the upstream\'s authorization server.',
  'upstreams.<name>.auth.tokenExchange.clientSecret': 'Its client secret (use `${ENV}`); redacted by `check-config`, never logged.',
  'upstreams.<name>.auth.tokenExchange.tokenUrl': `The token endpoint, used as it is. Absent: read from \`issuer\`'s metadata, or
    discovered as an MCP client does, from the upstream's 401 \`WWW-Authenticate: Bearer resource_metadata=…\` (or its
    \`/.well-known/oauth-protected-resource\`), RFC 9728 metadata, then the authorization server's RFC 8414 metadata
    (OpenID Connect discovery as a fallback); a discovered server is used only when \`trustedIssuers\` or
    \`auth.oauth.issuer\` names it.`,
  'upstreams.<name>.auth.tokenExchange.issuer': `The authorization server's issuer: its token endpoint is read from its own RFC 8414
    (or OpenID Connect) metadata, and the upstream is not asked where to go. Not with \`tokenUrl\`.`,
  'upstreams.<name>.auth.tokenExchange.trustedIssuers': `Issuers an authorization server found by discovery may have; the first
    the upstream names that is listed is used. \`auth.oauth.issuer\` is trusted as well (it already vouches for every
    caller). A server the upstream names that is neither gets nothing (neither the client secret nor
    the caller's access token), not even a request: the call fails with \`cause: untrusted_server\`, naming it. Not with \`tokenUrl\` or
    \`issuer\`.`,
  'upstreams.<name>.auth.tokenExchange.resource': 'RFC 8707 `resource` asked for: the upstream\'s URL unless given.',
  'upstreams.<name>.auth.tokenExchange.scope': 'Space-separated scopes asked for. Absent: none (the server\'s default).',
  'upstreams.<name>.auth.tokenExchange.tokenEndpointAuthMethod': `How the client authenticates to the token endpoint: HTTP
    Basic (\`client_secret_basic\`) or form fields (\`client_secret_post\`).`,
  'upstreams.<name>.auth.tokenExchange.audience': 'RFC 8693 `audience` asked for, when the server wants one.',
  'upstreams.<name>.auth.signedIdentity': `The gateway signs a short-lived JWT for the upstream (\`iss\` = \`identity.issuer\`,
    \`sub\` = the qualified principal, \`jti\`), with the first of \`identity.keys\` (required); the upstream verifies it
    with the gateway's \`/.well-known/jwks.json\`.`,
  'upstreams.<name>.auth.signedIdentity.ttlSeconds': 'Lifetime of each token (`exp` - `iat`), 1 to 3600.',
  'upstreams.<name>.auth.signedIdentity.claims': `Claims copied from the caller's verified token when it has them, e.g.
    \`[email, groups]\`.`,
  'upstreams.<name>.auth.signedIdentity.audience': 'The `aud` of the token.',
  'upstreams.<name>.auth.claimHeaders': `Headers from the caller's verified claims, \`{ <header>: <claim> }\` (or
    \`principal\`), for upstreams on a trusted network: arrays joined by \`,\`, control characters removed,
    non-ASCII percent-encoded (UTF-8), at most 1024 bytes; an absent claim sends no header.`,
  'upstreams.<name>.auth.timeoutMs': `Deadline of one token request (with discovery): past it the call fails with an
    error naming the upstream.`,
  'upstreams.<name>.connectTimeoutMs': 'Deadline for opening a connection to the upstream. 0 = none.',
  'upstreams.<name>.headersTimeoutMs': `Deadline for the headers of an upstream's response. 0 = none: no transport
    default may cut a long tool call.`,
  'upstreams.<name>.bodyTimeoutMs': `Longest silence while reading an upstream's response body. 0 = none: SSE streams
    may stay idle for a long time.`,
  'upstreams.<name>.protocol': `\`auto\`: ask on connect (\`server/discover\` for 2026-07-28, then \`initialize\`) and
    speak to it in each client's own revision where it can; \`legacy\`: sessions only; \`modern\`: 2026-07-28 only.`,

  tasks: 'Which tool calls become durable tasks, and how tasks behave.',
  'tasks.defaults': "Every tool's task policy where no rule says otherwise; each rule's fields override these.",
  'tasks.defaults.mode': `\`forbidden\`: always synchronous; \`optional\`: a task when the client asks for one;
    \`required\`: callers must ask for a task, others are refused. Aliases: \`never\` = forbidden, \`always\` =
    required. An upstream that requires a task raises \`optional\` to \`required\`.`,
  'tasks.defaults.ttlMs': `How long a task is kept after it is created, when the client asks no TTL; a client's TTL
    is clamped to \`maxTtlMs\`. At most \`maxTtlMs\`.`,
  'tasks.defaults.maxTtlMs': `The longest TTL a client may get; a larger request is clamped and the granted TTL
    reported back.`,
  'tasks.defaults.pollIntervalMs': 'The poll interval each task suggests to its client (`pollInterval`).',
  'tasks.defaults.maxRunMs': "Hard deadline of a task's upstream call; 0 = none.",
  'tasks.defaults.taskAfterMs': `2026-07-28 clients that declare the tasks extension, and \`plainCalls: background\`:
    wait this long for the upstream, answer with its result if it came, else with a task (0 = a task at once).
    Questions the upstream asks inside the window go out as MRTR rounds first.`,
  'tasks.defaults.concurrency': `Running tasks per tool at once, across all replicas; more wait in \`working\`, queued
    in order, and start on whichever replica holds them when a slot frees. 0 = unlimited.`,
  'tasks.defaults.maxTasksPerPrincipal': `Unfinished tasks one principal may hold, across all replicas; more are
    refused (-32603 \`Too many unfinished tasks ...\`). Without auth every client (all 2025 sessions and 2026-07-28
    clients) is one principal for it. 0 = unlimited.`,
  'tasks.defaults.keepAliveProgressMs': `A plain tools/call (not a task) whose client sent a \`progressToken\` gets
    \`notifications/progress\` at least this often while the upstream is silent (values always increase; the
    upstream's own progress is rewritten where needed), so hosts that reset their request timeout on progress keep
    waiting; \`task_result\` too while it waits. 0 = off.`,
  'tasks.defaults.plainCalls': `tools/call without a task asked for (2025 without \`params.task\`, 2026 without the
    tasks extension): \`wait\` = answer when the upstream does (with keep-alive progress); \`background\` = run it as a
    task and, past \`taskAfterMs\`, answer with a tool result naming it, to be fetched with the task tools.
    \`mode: forbidden\` wins.`,
  'tasks.defaults.retry': 'What happens to a task whose replica dies while running it.',
  'tasks.defaults.retry.onLoss': `\`true\`: run the call again on the replica that noticed, instead of failing the
    task. Only for tools that are safe to run twice.`,
  'tasks.defaults.retry.maxAttempts': 'Executions in all, the first included.',
  'tasks.rules': `Per-tool policy. The first rule whose \`match\` fits the exposed tool name wins; the fields it gives
    override \`tasks.defaults\`.`,
  'tasks.rules[].match': `Glob (\`*\` any run of characters, \`?\` one) on the exposed tool name: prefix included,
    after any rename.`,
  ...byKey(POLICY_KEYS, 'tasks.rules[]', (key) => `Overrides \`tasks.defaults.${key}\` for the tools the rule matches.`),
  'tasks.rules[].retry.onLoss': 'As `tasks.defaults.retry.onLoss`.',
  'tasks.rules[].retry.maxAttempts': 'As `tasks.defaults.retry.maxAttempts`.',
  'tasks.rules[].approval': `Hold every call to the matched tools until an approver decides (docs/approvals-and-webhooks.md): the
    caller gets a task at once, \`working\` and saying whom it waits for and until when; the upstream is called only
    after an approval, once, with the arguments that were approved. Needs \`auth\`; not with \`mode: forbidden\`.
    A rule with \`approval\` and no \`plainCalls\` of its own answers plain callers with \`plainCalls: background\`
    (a handle naming the task and the task tools): hosts time out long before people decide.`,
  'tasks.rules[].approval.approvers': `Principal globs, as \`auth.access\` names them (\`key:ops-*\`, \`oauth:alice\`, bare):
    who may approve or deny. Checked against the config in force when they decide.`,
  'tasks.rules[].approval.scopes': 'Credentials carrying any of these scopes may approve or deny too.',
  'tasks.rules[].approval.timeoutMs': `How long a held call waits for a decision. Past it the task fails saying the
    approval expired (any replica notices, whether anyone looks or not).`,
  'tasks.rules[].approval.allowSelf': '`true`: an approver may approve their own call. `false`: someone else must.',
  'tasks.rules[].approval.onCallerGone': `Under \`plainCalls: wait\`, what a plain caller that stops waiting (its request
    cancelled, its own timeout, a disconnect) does to its held call: \`keep\` = the hold stays for the approvers and the
    call runs once approved, its result fetched with the task tools (listed under \`taskTools.enabled: auto\`);
    \`cancel\` = the task is cancelled with the request. \`tasks/cancel\` and \`task_cancel\` always cancel.`,
  'tasks.immediateResponse': `Sent with each new task as \`_meta["io.modelcontextprotocol/model-immediate-response"]\`;
    \`""\` = not sent.`,
  'tasks.maxStoredBytesPerPrincipal': `Bytes of tasks one principal may hold in the task store, across all replicas:
    each task counts 3 KiB for its record, timeline, key and listing entries, plus its kept call (JSON) while it
    runs and its result or error (JSON) once it ended, from its creation until it expires or is deleted. At the
    budget a new task is refused (HTTP 503 + \`Retry-After\`, a JSON-RPC error naming the budget and when its oldest
    charge expires) until tasks expire or are deleted; results already kept are never dropped early. 0 = no
    budget.`,
  'tasks.maxStoredBytes': `The same for all principals together, per task store (every replica sharing it). 0 = no
    budget.`,
  'tasks.maxResultBytes': `The largest result (or error) one task stores, as JSON. A larger one fails its task with
    \`Task result too large\` instead of being stored. At least 1024. Keep it at or above the upstreams'
    \`maxMessageBytes\` unless tasks' results should be smaller than what plain calls may answer.`,
  'tasks.maxPendingApprovalsPerPrincipal': `Calls one principal may have waiting for approval at once
    (\`tasks.rules[].approval\`), across all replicas. Past it a new held call is refused at creation, in both
    revisions, with a JSON-RPC error saying how many wait and naming this key, until some are decided, expire or are
    cancelled. It keeps one principal from burying approvers' lists under its own calls. 0 = no cap.`,
  'tasks.taskTools': `The tools hosts without tasks use to fetch background results: \`task_result\`, \`task_status\`,
    \`task_cancel\`, \`task_list\` and \`task_delete\`, listed first in \`tools/list\` to every caller, acting only on the
    caller's own tasks.`,
  'tasks.taskTools.enabled': `\`auto\`: listed when the defaults or any rule say \`plainCalls: background\`, or a rule
    holds calls for approval (its plain callers fetch results with them). \`false\`
    is refused while plain calls go to the background (a rule with \`approval\` does unless it says
    \`plainCalls: wait\`): those callers fetch their results with them.`,
  'tasks.taskTools.prefix': `Letters, digits, \`_\`, \`-\`, \`.\` and \`/\`. Their names: \`<prefix>task_result\`,
    \`<prefix>task_status\`, \`<prefix>task_cancel\`, \`<prefix>task_list\`, \`<prefix>task_delete\`.`,
  'tasks.taskTools.names': `Names one by one (1-128 letters, digits, \`_\`, \`-\`, \`.\` or \`/\`), instead of the
    prefix, e.g. \`{ result: get_job_result }\`.`,
  'tasks.taskTools.names.result': "Name of the tool that waits for a task's end and returns its result.",
  'tasks.taskTools.names.status': `Name of the tool that returns a task's status, status message and what it waits
    for, at once.`,
  'tasks.taskTools.names.cancel': 'Name of the tool that cancels a task and its upstream call.',
  'tasks.taskTools.names.list': "Name of the tool that lists the caller's tasks, newest first.",
  'tasks.taskTools.names.delete': `Name of the tool that deletes an ended task and its result before their TTL (a running
    task must be cancelled first).`,
  'tasks.taskTools.waitSeconds': 'How long `task_result` waits for the task to end when the call does not say.',
  'tasks.taskTools.maxWaitSeconds': `The most \`task_result\` waits, whatever it is asked: keep it under your hosts'
    request timeouts. At least \`waitSeconds\`.`,

  sessions: 'Client sessions (2025-era revisions) and the streams clients hold open.',
  'sessions.idleTimeoutMs': 'A session unused this long on every replica is ended; its id then gets 404.',
  'sessions.maxPerPrincipal': `Sessions open at once per principal, across replicas (without auth every client is one
    principal: all sessions); \`initialize\` beyond: HTTP 429. 0 = unlimited.`,
  'sessions.maxStreamsPerPrincipal': `SSE streams one principal holds open on this replica (2025 GET streams and POSTs
    that may answer as a stream, 2026-07-28 \`subscriptions/listen\`; without auth: all clients together); beyond: HTTP
    429, \`Retry-After: 5\`, -32600 naming the key. 0 = unlimited.`,

  sse: 'Server-sent event streams to clients.',
  'sse.keepAliveMs': `\`: keep-alive\` comments on open SSE streams this often, so idle-timeout proxies do not cut
    long calls.`,
  'sse.replayBufferSize': `Events kept per stream for \`Last-Event-ID\` resumption (and within
    \`maxBufferedBytesPerStream\`).`,
  'sse.jsonWindowMs': `A forwarded call answered within this window, with nothing to stream first, gets plain JSON;
    otherwise its answer becomes a resumable SSE stream (priming event first). 0 = always SSE.`,
  'sse.maxBufferedBytesPerStream': `Bytes one SSE stream (2025 POST or GET stream, 2026-07-28 response or listen stream)
    may hold for a client that has not taken them: waiting, queued in the response, kept for replay. Past it the
    client gets coalesced progress and a warning counting the logs dropped; the call's upstream is not read until the
    client reads, or on a shared stdio upstream the call fails (-32603).`,
  'sse.maxBufferedBytes': `The same for all streams of the replica together; past it every stream with messages
    waiting counts as full. 0 = no total bound.`,

  mrtr: "2026-07-28 multi-round-trip requests: calls parked while the client answers the upstream's questions.",
  'mrtr.parkTimeoutMs': `A call waiting for the client's retry (after an \`InputRequiredResult\`) is cancelled upstream
    when no retry comes within this time.`,
  lists: 'Aggregated lists (tools, prompts, resources, templates), which ask every upstream at once.',
  'lists.pageSize': 'Most items in one page of an aggregated list; past it a signed cursor continues.',

  replicas: 'Replicas sharing one store: liveness, shutdown and load.',
  'replicas.leaseMs': `How long a replica may go without a heartbeat (it beats every leaseMs/3: one Redis write, however
    many tasks it runs). When a replica dies, another fails its tasks ("The gateway lost the call ...") or re-runs them
    (\`retry.onLoss\`) between 1 and 7/6 × leaseMs after its last heartbeat, plus settling them. Slot tickets
    (\`concurrency\`, \`maxTasksPerPrincipal\`) are leased for 3 × leaseMs.`,
  'replicas.drainTimeoutMs': `On SIGTERM: no new requests; running tasks get this long to finish, then what still
    runs fails ("The gateway shut down while the task was running"). Less than \`shutdownTimeoutMs\`. Also how long
    an upstream removed by a config reload keeps its running tasks.`,
  'replicas.maxRunningTasks': `Tasks this replica runs at once (those waiting for a slot included); a new task beyond
    is refused, retryably: -32603 \`This gateway replica already runs N tasks (replicas.maxRunningTasks: M); try again
    shortly\` with \`data.retryAfterMs\` (1000), in HTTP 503 + \`Retry-After: 1\`. Tasks taken over from a lost replica
    are not refused. 0 = unlimited.`,

  log: "The gateway's log: pino JSON lines (pretty-printed on a terminal), secrets redacted.",
  'log.level': '`TASKGATE_LOG_LEVEL` overrides it. Audit events are logged at `info`.',
  metrics: 'The Prometheus endpoint (per replica). With `auth`, only `auth.admin` principals or scopes may read it.',
  'metrics.enabled': '`false`: no route at all (404).',
  'metrics.path': `Where it is served, an absolute path (letters, digits, \`._~/-\`); must differ from
    \`listen.path\`, \`/healthz\`, \`/readyz\` and \`dashboard.path\`.`,
  'metrics.principalLabels': `\`true\`: a \`principal\` label on the task and denial counters (at most 500 values,
    then \`other\`).`,
  dashboard: 'The task dashboard page. With `auth`, only `auth.admin` principals or scopes may use it.',
  'dashboard.enabled': '`false`: no route at all (404).',
  'dashboard.path': `The page, an absolute path (letters, digits, \`._~/-\`); its JSON API is under \`<path>/api/\`.
    Must differ from \`listen.path\`, \`/healthz\`, \`/readyz\` and \`metrics.path\`.`,

  auth: `Authentication: with it every request to the MCP endpoint needs \`Authorization: Bearer <token>\`, an API key
    or an OAuth access token (never passed upstream). Absent: no authentication (warned about when bound beyond
    loopback). Needs \`apiKeys\`, \`oauth\`, or both.`,
  'auth.resource': `An http(s) URL: the canonical URI of this endpoint as clients reach it (behind a TLS-terminating
    proxy, the public https one): tokens must be issued for it (\`aud\`), and the 401's \`resource_metadata\` URL is
    built from it.`,
  'auth.apiKeys': 'Static bearer tokens, kept only as their SHA-256. The principal is `key:<principal>`.',
  'auth.apiKeys[].principal': "The key's name; may not start with `key:` or `oauth:`.",
  'auth.apiKeys[].key': 'The key itself, at least 16 characters (use `${ENV}`). Give `key` or `sha256`, not both.',
  'auth.apiKeys[].sha256': "The key's SHA-256 as 64 hex digits instead of the key (`printf %s \"$KEY\" | sha256sum`).",
  'auth.apiKeys[].scopes': 'Scopes the key carries, for `access` and `admin` rules.',
  'auth.oauth': `JWT access tokens (RFC 9068) from an OAuth 2.1 / OIDC authorization server; the gateway is a resource
    server. The principal is \`oauth:<issuer>#<sub>\`; scopes come from \`scope\` or \`scp\`.`,
  'auth.oauth.issuer': `Exactly the \`iss\` of its tokens: an http(s) URL without query or fragment. \`jwks_uri\` is
    found by RFC 8414 metadata, then OpenID Connect discovery.`,
  'auth.oauth.jwksUri': "The issuer's JWKS URL (http or https), to skip discovery.",
  'auth.oauth.audience': 'The audience (`aud`) tokens must name.',
  'auth.oauth.requiredScopes': 'Every token must carry these, else 403 `insufficient_scope`.',
  'auth.oauth.clockToleranceSeconds': `Skew allowed for \`exp\`, \`nbf\` and \`iat\`: a token expired, not yet valid or
    issued further in the future than this gets 401 \`invalid_token\`.`,
  'auth.access': `Access rules. When present, default deny: only what a rule that applies grants is usable; the rest is
    left out of lists and answered as unknown, and the denial is audited. A kind no rule names is hidden from
    everyone. Absent: every caller may use everything.`,
  'auth.access[].principals': `The rule applies to these principal globs: bare (\`alice\`, \`team-*\`) matches the API
    key and the OAuth subject of that name; \`key:alice\` only the key, \`oauth:alice\` only the subject. A rule names
    principals or scopes (or both).`,
  'auth.access[].scopes': 'The rule applies to a credential carrying any of these scopes.',
  'auth.access[].tools': 'Globs on exposed tool names (prefixes included) the rule grants.',
  'auth.access[].prompts': 'Globs on exposed prompt names the rule grants.',
  'auth.access[].resources': `Globs on resource URIs (templates by their \`uriTemplate\` text) the rule grants,
    compared in RFC 3986 normal form.`,
  'auth.rateLimits': `Per principal, counted in the store across replicas, in fixed windows; 0 = unlimited. Past a
    limit: HTTP 429 with \`Retry-After\` and a JSON-RPC error (-32001) whose \`data.retryAfterMs\` says when to
    retry.`,
  'auth.rateLimits.requestsPerSecond': `Requests to the MCP endpoint, each message of a batch one; a batch that goes
    past it is refused whole.`,
  'auth.rateLimits.taskCreationsPerMinute': 'New tasks (both revisions).',
  'auth.rateLimits.rules': 'The first rule whose `principals` match replaces the limits it names.',
  'auth.rateLimits.rules[].principals': 'Principal globs, bare or qualified as in `auth.access`.',
  ...byKey(RATE_KEYS, 'auth.rateLimits.rules[]', (key) => `Replaces \`auth.rateLimits.${key}\` for the principals the rule matches.`),
  'auth.admin': `Who may use the dashboard and \`/metrics\` while auth is on (401 without a credential, 403 for anyone
    else). Absent: nobody. Names principals or scopes (or both).`,
  'auth.admin.principals': 'Principal globs, matched as `auth.access` principals are, e.g. `[ops, "key:deploy-*"]`.',
  'auth.admin.scopes': 'Or any credential carrying one of these scopes.',
  identity: `The gateway's own identity toward upstreams: the issuer and keys it signs identities with
    (\`upstreams.<name>.auth.signedIdentity\`), and the keys it seals what tasks keep with.`,
  'identity.issuer': `The \`iss\` of what the gateway signs, an http(s) URL; its keys are at
    \`<listen URL>/.well-known/jwks.json\`.`,
  'identity.keys': `Signing keys: the first signs, all are published at \`/.well-known/jwks.json\` (add the new key
    second, publish, then move it first to rotate).`,
  'identity.keys[].kid': 'Key id (`kid` header and JWK), 1-64 letters, digits, `_` or `-`; unique.',
  'identity.keys[].privateKey': `PEM PKCS#8 private key (use \`\${ENV}\`): EC P-256 signs ES256, RSA (2048 bits or
    more) RS256. Checked at load; redacted by \`check-config\`.`,
  'identity.sealingKeys': `AES-256-GCM keys sealing what a task keeps to act for its caller later (on any replica,
    after a restart): the first seals, all open; a value sealed with a key no longer listed cannot be opened.`,
  'identity.sealingKeys[].kid': 'Key id recorded with each sealed value, 1-64 letters, digits, `_` or `-`; unique.',
  'identity.sealingKeys[].key': `Base64 of exactly 32 random bytes (\`openssl rand -base64 32\`; use \`\${ENV}\`).
    Redacted by \`check-config\`.`,
  webhooks: `Endpoints told of task and approval events, signed as Standard Webhooks and delivered at least once from a
    queue in the store (docs/approvals-and-webhooks.md). Only these URLs are called; redirects are not followed. Absent:
    none. Follows config reloads.`,
  'webhooks[].url': `The endpoint, an http(s) URL: every delivery is a POST here. Its query is redacted by
    \`check-config\`.`,
  'webhooks[].events': `What it hears: \`task.created\`, \`task.completed\`, \`task.failed\`, \`task.cancelled\`,
    \`task.input_required\`, \`approval.requested\`, \`approval.decided\`.`,
  'webhooks[].secret': `\`whsec_\` and the base64 of 24-64 random bytes (\`echo "whsec_$(openssl rand -base64 32)"\`; use
    \`\${ENV}\`): the key of the \`webhook-signature\` HMAC. Redacted by \`check-config\`, never logged.`,
  'webhooks[].tools': 'Globs on exposed tool names (prefixes included): only tasks of these tools. Absent: every tool.',
  'webhooks[].principals': `Principal globs as \`auth.access\` names them (\`alice\`, \`key:ci-*\`, \`oauth:*\`): only
    their tasks. Absent: every principal (without \`auth\` tasks have no named principal, and a list matches none).`,
  'webhooks[].includeResult': `\`true\`: deliveries of ended tasks carry the result (or error) in \`data.result\`;
    left out, with \`data.resultOmitted: true\`, when it would make the body larger than
    \`webhookDelivery.maxBodyBytes\`. \`false\`: nothing of the tool's output goes, not even its error text: a
    failure the upstream reported has the \`statusMessage\` "The tool reported an error; its text goes only to
    endpoints with includeResult" (the gateway's own reasons, such as \`maxRunMs\`, stay as they are).`,
  'webhooks[].id': `Names the endpoint's queue in the store and its \`endpoint\` metrics label: 1-64 letters, digits,
    \`_\` or \`-\`, unique. Changing it (or, without it, the URL) starts a new queue: the old one's deliveries are
    not sent.`,
  webhookDelivery: 'How webhook deliveries are made, for every endpoint.',
  'webhookDelivery.timeoutMs': `One try may take this long, until the response's headers; longer is a failed try (the
    connection is dropped).`,
  'webhookDelivery.maxAgeMs': `Tries stop this long after the event: the delivery is dead-lettered (a log line with
    \`audit: webhook.dead_lettered\` and a metric). Also how long an endpoint's queue is kept after it was last used.`,
  'webhookDelivery.initialBackoffMs': `The wait after the first failed try (non-2xx, network error, timeout); each next
    wait doubles, with full jitter, up to \`maxBackoffMs\`.`,
  'webhookDelivery.maxBackoffMs': 'The longest wait between two tries.',
  'webhookDelivery.maxQueuedPerEndpoint': `Deliveries one endpoint's queue holds, waiting or in flight, across
    replicas. When full, the newest event is dropped for that endpoint (a warning and
    \`taskgate_webhook_dropped_total{reason="queue_full"}\`).`,
  'webhookDelivery.maxQueuedBytesPerEndpoint': `Bytes of bodies one endpoint's queue holds, waiting or in flight,
    across replicas: the results \`includeResult\` endpoints get are copies, counted here (and not in
    \`tasks.maxStoredBytes\`) until the endpoint acknowledges them or they are dead-lettered. When a body would pass
    it, that newest event is dropped for that endpoint, as at \`maxQueuedPerEndpoint\` (a warning and
    \`taskgate_webhook_dropped_total{reason="queue_full"}\`). At least \`maxBodyBytes\`.`,
  'webhookDelivery.maxBodyBytes': `Largest body of a delivery. A result that would pass it is left out; a body still
    larger is dropped (\`reason="too_large"\`).`,
  'webhookDelivery.concurrency': `Tries in flight to one endpoint at once, across every replica (leases in the store). An
    endpoint that is slow or down holds up only its own queue.`,
  shutdownTimeoutMs: `Deadline of a clean shutdown. On SIGTERM or SIGINT the gateway stops accepting requests, ends
    sessions and their streams, closes upstream connections (stopping child processes) and exits within this. 0 = no
    deadline.`,
};

/**
 * Defaults the schema leaves to load.ts (the key is optional there and filled in, or derived, when the config is
 * built). Shown in the reference in place of the schema's own default.
 */
export const DERIVED_DEFAULTS: Readonly<Record<string, string>> = {
  'upstreams.<name>.transport': '`stdio` when `command` is given, `streamable-http` when `url` is',
  'upstreams.<name>.prefix': '`<name>__` with several upstreams, `""` with one',
  ...byKey(POLICY_KEYS, 'tasks.defaults', (key) => `\`${inline(DEFAULT_POLICY[key as keyof typeof DEFAULT_POLICY])}\``),
  'tasks.defaults.retry.maxAttempts': '`2` with `onLoss: true`, else `1`',
  ...byKey(POLICY_KEYS, 'tasks.rules[]', (key) => `\`tasks.defaults.${key}\``),
  'tasks.rules[].retry.maxAttempts': '`2` with `onLoss: true`, else `1`',
  'tasks.taskTools.names.result': '`<prefix>task_result`',
  'tasks.taskTools.names.status': '`<prefix>task_status`',
  'tasks.taskTools.names.cancel': '`<prefix>task_cancel`',
  'tasks.taskTools.names.list': '`<prefix>task_list`',
  'tasks.taskTools.names.delete': '`<prefix>task_delete`',
  'auth.oauth.audience': '`auth.resource`',
  'upstreams.<name>.auth.clientCredentials.resource': "the upstream's `url`",
  'upstreams.<name>.auth.tokenExchange.resource': "the upstream's `url`",
  'upstreams.<name>.auth.signedIdentity.audience': "the upstream's `url`",
  'identity.issuer': 'the origin of `auth.resource`, else `http://<listen.host>:<listen.port>`',
  ...byKey(RATE_KEYS, 'auth.rateLimits.rules[]', (key) => `\`auth.rateLimits.${key}\``),
};

function inline(value: unknown): string {
  if (value !== null && typeof value === 'object') {
    return `{ ${Object.entries(value).map(([k, v]) => `${k}: ${inline(v)}`).join(', ')} }`;
  }
  return String(value);
}
