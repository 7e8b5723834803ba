// Bounded property tests of what arrives from clients: JSON-RPC messages, request bodies, the 2026-07-28 `_meta`
// envelope, MCP headers and Host/Origin. Whatever a client sends, these functions must answer with a value or a
// GatewayError (a 4xx for the client), never crash with another error (a 500, or a dropped connection), and the
// security checks must hold for every input, not only the hand-picked ones. fast-check prints the seed of any
// failure; pass it back as `{ seed, path }` to replay it.
// One file because its properties share the fast-check arbitraries built at its top (JSON-RPC fields, the envelope's
// `_meta`, header values, hosts and origins).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseConfig } from '../../src/config/load.js';
import type { ListenConfig } from '../../src/config/types.js';
import { GatewayError, type ErrorCode } from '../../src/errors.js';
import { checkRequestOrigin, isLoopbackHostname, parseHostHeader } from '../../src/http/guards.js';
import { asObject, decodeJsonBody, encodeMessage, jsonNestingExceeds, MessageEncodingError, validateMessage, type JsonRpcRequest } from '../../src/jsonrpc.js';
import { checkRoutingHeaders, decodeHeaderValue, isStatelessMessage, readEnvelope } from '../../src/protocol/rev2026-07-28/envelope.js';
import { SESSION_VERSIONS, LOG_LEVELS, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION } from '../../src/mcp.js';
import { STATELESS_VERSION } from '../../src/protocol/rev2026-07-28/codec.js';
import { SUPPORTED_VERSIONS } from '../../src/protocol/revisions.js';

type Headers = Record<string, string | string[] | undefined>;
type Attempt<T> = { ok: true; value: T } | { ok: false; error: GatewayError };

/** Runs `fn`; anything it throws must be a GatewayError with one of `codes`. */
function attempt<T>(fn: () => T, codes: readonly ErrorCode[]): Attempt<T> {
  try {
    return { ok: true, value: fn() };
  } catch (error) {
    assert.ok(error instanceof GatewayError, `expected a GatewayError, got ${String(error)}`);
    assert.ok(codes.includes(error.code), `unexpected GatewayError code '${error.code}': ${error.message}`);
    return { ok: false, error };
  }
}

/** A refusal as the client sees it: an HTTP status and one of the expected JSON-RPC codes. */
function assertRefusal(error: GatewayError, httpStatus: number, rpcCodes: readonly number[]): void {
  assert.equal(error.httpStatus, httpStatus, `${error.code} must answer HTTP ${httpStatus}`);
  assert.ok(rpcCodes.includes(error.toJsonRpc().code), `${error.code} has unexpected JSON-RPC code ${error.toJsonRpc().code}`);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const isId = (value: unknown): boolean => typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));

/** Nesting depth of a JSON value: each array or object is one level, scalars none. */
function nestingDepth(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children: unknown[] = Array.isArray(value) ? value : Object.values(value);
  return 1 + children.reduce<number>((deepest, child) => Math.max(deepest, nestingDepth(child)), 0);
}

/** An object as JSON.parse builds it: `__proto__` and friends are own keys, the prototype stays Object's. */
const wireObject = (entries: Iterable<readonly [string, unknown]>): Record<string, unknown> => Object.fromEntries(entries);

const toBase64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');
const encodeSentinel = (text: string): string => `=?base64?${toBase64(text)}?=`;

// ---- arbitraries ----

/** Names a lookup on a plain object would wrongly "know". */
const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype'];

/** Characters that matter to a JSON scanner: brackets, quotes, escapes, control characters, a lone surrogate. */
const jsonTrickyChar = fc.oneof(
  fc.constantFrom('[', ']', '{', '}', '"', '\\', '\\"', '\\\\', ':', ',', '\u0000', '\n', '\ud800', 'a'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);

const smallJson = fc.jsonValue({ maxDepth: 3 });
/** Values JSON cannot carry but a caller might still hand over. */
const nonJsonScalar = fc.constantFrom(undefined, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0);
const anyField = fc.oneof(smallJson, nonJsonScalar);

const fieldName = fc.oneof(fc.constantFrom('jsonrpc', 'id', 'method', 'params', 'result', 'error', '_meta', ...PROTOTYPE_NAMES), fc.string({ maxLength: 8 }));
const objectField = fc.array(fc.tuple(fieldName, smallJson), { maxLength: 5 }).map(wireObject);

/** Marks a key left out of the object `objectWith` builds. */
const ABSENT = Symbol('absent');
/** `arbitrary`, or the key left out once in `freq` draws. */
const sometimes = <T>(arbitrary: fc.Arbitrary<T>, freq = 2): fc.Arbitrary<T | typeof ABSENT> => fc.option(arbitrary, { nil: ABSENT, freq });
/** An object with the given fields (those drawn ABSENT left out) over random `extra` keys. */
function objectWith(extra: fc.Arbitrary<Record<string, unknown>>, fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .tuple(extra, fc.record(fields))
    .map(([others, given]) => wireObject([...Object.entries(others), ...Object.entries(given).filter(([, value]) => value !== ABSENT)]));
}

const jsonrpcField = fc.oneof({ weight: 4, arbitrary: fc.constant('2.0') }, fc.constantFrom('2', '1.0', 2, null), anyField);
const idField = fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.double(), anyField);
const methodField = fc.oneof(fc.constantFrom('', 'tools/call', 'initialize', ...PROTOTYPE_NAMES), fc.string({ maxLength: 10 }), anyField);
const objectOrNot = fc.oneof({ weight: 2, arbitrary: objectField }, anyField);
const errorField = fc.oneof(
  { weight: 2, arbitrary: objectWith(objectField, { code: fc.oneof(fc.integer(), fc.double(), fc.string()), message: sometimes(fc.oneof(fc.string(), fc.integer()), 5) }) },
  anyField,
);
/** Objects shaped like JSON-RPC requests, notifications and responses, their fields often wrong or missing. */
const messageLike = fc.oneof(
  objectWith(objectField, { jsonrpc: jsonrpcField, id: sometimes(idField), method: methodField, params: sometimes(objectOrNot) }),
  objectWith(objectField, { jsonrpc: jsonrpcField, id: idField, result: sometimes(objectOrNot), error: sometimes(errorField) }),
  objectWith(objectField, {
    jsonrpc: sometimes(jsonrpcField),
    id: sometimes(idField),
    method: sometimes(methodField),
    params: sometimes(objectOrNot),
    result: sometimes(objectOrNot),
    error: sometimes(errorField),
  }),
);

const versionString = fc.oneof(
  { weight: 3, arbitrary: fc.constant(STATELESS_VERSION) },
  fc.constantFrom(...SESSION_VERSIONS, '2024-11-05', '2099-01-01', '', ` ${STATELESS_VERSION}`),
  fc.string({ maxLength: 12 }),
);

/** A header as Node hands it over: one value or several. */
const headerValue = (value: fc.Arbitrary<string>): fc.Arbitrary<string | string[]> => fc.oneof({ weight: 4, arbitrary: value }, fc.array(value, { maxLength: 3 }));
const otherHeaders = fc.dictionary(fc.oneof(fc.constantFrom('mcp-session-id', ...PROTOTYPE_NAMES), fc.string({ maxLength: 8 })), headerValue(fc.string({ maxLength: 8 })), {
  maxKeys: 3,
});
/** Request headers: the given MCP headers, each sometimes missing, among others. */
const withHeaders = (known: Record<string, fc.Arbitrary<string | string[]>>): fc.Arbitrary<Headers> =>
  objectWith(otherHeaders, Object.fromEntries(Object.entries(known).map(([name, value]) => [name, sometimes(value, 6)]))) as fc.Arbitrary<Headers>;

const capabilities = fc.oneof(objectField, fc.constant({ extensions: { 'io.modelcontextprotocol/tasks': {} } }));
const logLevel = fc.constantFrom(...LOG_LEVELS);
/** `_meta` of a 2026-07-28 request, every key sometimes missing or malformed. */
const envelopeMeta = objectWith(objectField, {
  [META_PROTOCOL_VERSION]: sometimes(fc.oneof({ weight: 3, arbitrary: versionString }, anyField), 6),
  [META_CLIENT_CAPABILITIES]: sometimes(fc.oneof({ weight: 3, arbitrary: capabilities }, anyField), 6),
  [META_CLIENT_INFO]: sometimes(fc.oneof(fc.constant({ name: 'fuzz', version: '1.0.0' }), anyField)),
  [META_LOG_LEVEL]: sometimes(fc.oneof({ weight: 3, arbitrary: logLevel }, fc.string({ maxLength: 8 }), anyField)),
});

const rev2026Request = (params: JsonRpcRequest['params']): JsonRpcRequest => ({ jsonrpc: '2.0', id: 1, method: 'tools/list', params });

const ROUTED_METHODS = ['tools/call', 'prompts/get', 'resources/read', 'tasks/get', 'tasks/update', 'tasks/cancel'];
const method = fc.oneof(fc.constantFrom(...ROUTED_METHODS, 'tools/list', 'server/discover', ...PROTOTYPE_NAMES), fc.string({ minLength: 1, maxLength: 10 }));
/** Strings with no lone surrogate, so UTF-8 carries them unchanged. */
const unicodeText = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 12 }));
const padded = (value: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.tuple(fc.constantFrom('', ' ', '\t', '  '), value, fc.constantFrom('', ' ', '\t')).map((parts) => parts.join(''));
const base64Junk = fc.string({ unit: fc.constantFrom('A', 'Q', 'z', '0', '+', '/', '=', '-', '_', '?', ' ', '\n', 'é'), maxLength: 12 });
/** Values of MCP headers: plain, correctly encoded, or a sentinel with broken base64 inside. */
const mcpHeaderText = fc.oneof(fc.string({ maxLength: 10 }), unicodeText.map(encodeSentinel), base64Junk.map((junk) => `=?base64?${junk}?=`));

const port = fc.integer({ min: 1, max: 65535 });
const dnsLabel = fc.stringMatching(/^[a-z][a-z0-9-]{0,14}[a-z0-9]$/);
const letterTld = fc.stringMatching(/^[a-z]{2,6}$/);
const octet = fc.integer({ min: 0, max: 255 });
/** `host` or `host:port`, any port. */
const withOptionalPort = (host: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.tuple(host, fc.option(port, { nil: undefined })).map(([name, p]) => (p === undefined ? name : `${name}:${p}`));
/** Host headers: random text, pieces a rebinding attack would combine, and near-loopback names with suffixes. */
const hostLike = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc
    .array(fc.constantFrom('127', '0', '1', '.', ':', '[', ']', '::1', 'localhost', 'evil', 'com', '@', '8080', '99999', 'ffff', ' ', '%'), { maxLength: 8 })
    .map((parts) => parts.join('')),
  fc
    .tuple(
      fc.constantFrom('127.0.0.1', 'LOCALHOST', '[::1]', '127.255.0.9', '[::ffff:127.0.0.1]', '[0::1]', '0.0.0.0', '[::]', '127.0.0.01', '127.1', '2130706433'),
      fc.constantFrom('', ':', ':0', ':80', ':65535', ':65536', ':99999', '.', '.evil.com', '@evil.com', ' ', 'x', '%25lo'),
    )
    .map((parts) => parts.join('')),
);

/** The listen section as the loader makes it by default: bound to 127.0.0.1, nothing allowed beyond loopback. */
const LISTEN: ListenConfig = parseConfig('upstreams: { a: { command: a } }', 'fuzz.yaml', {}).listen;
const hostAccepted = (host: string): boolean => attempt(() => checkRequestOrigin(LISTEN, host, undefined), ['host_forbidden']).ok;
const originAccepted = (origin: string): boolean => attempt(() => checkRequestOrigin(LISTEN, '127.0.0.1:8080', origin), ['origin_forbidden']).ok;

// ---- properties ----

describe('wire fuzz: validateMessage', () => {
  function checkValidated(value: unknown): void {
    const result = validateMessage(value);
    if (typeof result === 'string') return;
    assert.equal(result, value, 'a valid message is returned as the same object');
    const message = result as unknown as Record<string, unknown>;
    assert.equal(message.jsonrpc, '2.0');
    if ('method' in message) {
      assert.ok(typeof message.method === 'string' && message.method !== '', 'method is a non-empty string');
      assert.ok(message.params === undefined || isPlainObject(message.params), 'params is absent or an object');
      assert.ok(!('id' in message) || isId(message.id), 'id is absent, a string or a finite number');
      return;
    }
    assert.ok(('result' in message) !== ('error' in message), 'a response has exactly one of result and error');
    assert.ok(isId(message.id), 'a response id is a string or a finite number');
    if ('result' in message) assert.ok(isPlainObject(message.result), 'result is an object');
    else {
      const error = message.error;
      assert.ok(isPlainObject(error) && typeof error.code === 'number' && typeof error.message === 'string', 'error has a numeric code and a string message');
    }
  }

  it('never throws on a JSON value, and what it accepts is a well-formed message', () => {
    fc.assert(fc.property(fc.jsonValue(), checkValidated), { numRuns: 300 });
  });

  it('never throws on message-like objects, including prototype names as keys and methods', () => {
    fc.assert(fc.property(messageLike, checkValidated), { numRuns: 1000 });
  });
});

describe('wire fuzz: jsonNestingExceeds', () => {
  const maxDepth = fc.integer({ min: 0, max: 6 });

  it('agrees with the nesting depth of any serialized JSON value, strings with brackets and escapes included', () => {
    const value = fc.jsonValue({ maxDepth: 8, depthSize: 'medium', stringUnit: jsonTrickyChar });
    fc.assert(
      fc.property(value, maxDepth, (json, limit) => {
        assert.equal(jsonNestingExceeds(JSON.stringify(json), limit), nestingDepth(json) > limit);
      }),
      { numRuns: 500 },
    );
  });

  it('never throws on arbitrary text, and refusing at one depth means refusing at every lower one', () => {
    const text = fc.oneof(fc.string({ unit: jsonTrickyChar, maxLength: 60 }), fc.string({ unit: 'binary', maxLength: 60 }));
    fc.assert(
      fc.property(text, maxDepth, (input, limit) => {
        const exceeds = jsonNestingExceeds(input, limit + 1);
        assert.equal(typeof exceeds, 'boolean');
        if (exceeds) assert.equal(jsonNestingExceeds(input, limit), true);
      }),
      { numRuns: 500 },
    );
  });
});

describe('wire fuzz: decodeJsonBody (what upstreams send as application/json)', () => {
  const objectOrArray = fc.oneof(
    fc.dictionary(fc.string({ unit: jsonTrickyChar, maxLength: 6 }), fc.jsonValue({ maxDepth: 3, stringUnit: jsonTrickyChar }), { maxKeys: 4 }),
    fc.array(fc.jsonValue({ maxDepth: 3, stringUnit: jsonTrickyChar }), { maxLength: 4 }),
  );
  const gap = fc.constantFrom('', ' ', '\n', '\r\n', '\t ');

  it('one value (with or without a BOM) is that value; several objects or arrays in a row are those values, in order', () => {
    fc.assert(
      fc.property(fc.array(objectOrArray, { minLength: 1, maxLength: 4 }), gap, fc.boolean(), (values, between, bom) => {
        const text = `${bom ? '\uFEFF' : ''}${values.map((v) => JSON.stringify(v)).join(between)}`;
        const decoded = decodeJsonBody(text);
        assert.ok(!('error' in decoded), text);
        assert.deepEqual(decoded.values, values.map((v) => JSON.parse(JSON.stringify(v)) as unknown));
        assert.equal(decoded.quirk !== undefined, bom || values.length > 1);
      }),
      { numRuns: 500 },
    );
  });

  it('never throws; text that is no JSON value or values is an error', () => {
    fc.assert(
      fc.property(fc.string({ unit: jsonTrickyChar, maxLength: 40 }), (text) => {
        const decoded = decodeJsonBody(text);
        if ('error' in decoded) return;
        for (const value of decoded.values) assert.notEqual(value, undefined);
      }),
      { numRuns: 500 },
    );
    for (const bad of ['{"a":1} x', '{"a":1}}', 'not json', '{"a":1}{"b":', '1 2']) assert.ok('error' in decodeJsonBody(bad), bad);
  });
});

describe('wire fuzz: encodeMessage', () => {
  it("returns JSON.stringify's text for any JSON value", () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), (value) => {
        assert.equal(encodeMessage(value), JSON.stringify(value));
      }),
      { numRuns: 300 },
    );
  });

  it('throws MessageEncodingError, not RangeError or TypeError, for values JSON cannot encode', () => {
    let deep: unknown = [];
    for (let i = 0; i < 200_000; i++) deep = [deep];
    const cyclic: Record<string, unknown> = { jsonrpc: '2.0' };
    cyclic.self = cyclic;
    for (const value of [deep, cyclic, { id: 1n }]) {
      assert.throws(() => encodeMessage(value), MessageEncodingError);
    }
  });
});

describe('wire fuzz: the 2026-07-28 envelope', () => {
  const ENVELOPE_CODES: readonly ErrorCode[] = ['header_mismatch', 'invalid_envelope', 'unsupported_version'];
  const validMeta = objectWith(objectField, {
    [META_PROTOCOL_VERSION]: fc.constant(STATELESS_VERSION),
    [META_CLIENT_CAPABILITIES]: capabilities,
    [META_LOG_LEVEL]: sometimes(logLevel),
  });
  const validHeaders = objectWith(otherHeaders, {
    'mcp-protocol-version': fc.constantFrom(STATELESS_VERSION, [STATELESS_VERSION], [STATELESS_VERSION, '2025-11-25']),
  }) as fc.Arbitrary<Headers>;

  it('readEnvelope returns a client or refuses with HTTP 400 for any headers and _meta', () => {
    const params = fc.oneof(
      fc.constant(undefined),
      objectField,
      { weight: 4, arbitrary: envelopeMeta.map((meta) => ({ _meta: meta })) },
      anyField.map((meta) => ({ _meta: meta })),
    );
    // The header often repeats the body's version, so that unsupported versions get past the mismatch check.
    const envelopeCase = params.chain((requestParams) => {
      const bodyVersion = asObject(requestParams?._meta)?.[META_PROTOCOL_VERSION];
      const version = typeof bodyVersion === 'string' ? fc.oneof(fc.constant(bodyVersion), versionString) : versionString;
      return withHeaders({ 'mcp-protocol-version': headerValue(version) }).map((headers) => ({ requestParams, headers }));
    });
    fc.assert(
      fc.property(envelopeCase, ({ requestParams, headers }) => {
        const outcome = attempt(() => readEnvelope(rev2026Request(requestParams), headers, SUPPORTED_VERSIONS), ENVELOPE_CODES);
        if (!outcome.ok) return assertRefusal(outcome.error, 400, [-32020, -32602, -32022]);
        const meta = requestParams?._meta as Record<string, unknown>;
        assert.equal(outcome.value.protocolVersion, STATELESS_VERSION);
        assert.equal(outcome.value.capabilities, meta[META_CLIENT_CAPABILITIES]);
        assert.ok(outcome.value.logLevel === undefined || LOG_LEVELS.includes(outcome.value.logLevel));
      }),
      { numRuns: 1000 },
    );
  });

  it('readEnvelope accepts every valid envelope', () => {
    fc.assert(
      fc.property(validMeta, validHeaders, (meta, headers) => {
        const client = readEnvelope(rev2026Request({ _meta: meta }), headers, SUPPORTED_VERSIONS);
        assert.equal(client.protocolVersion, STATELESS_VERSION);
        assert.equal(client.capabilities, meta[META_CLIENT_CAPABILITIES]);
        assert.equal(client.logLevel, meta[META_LOG_LEVEL]);
      }),
      { numRuns: 300 },
    );
  });

  it('readEnvelope refuses an invalid log level with HTTP 400 and -32602', () => {
    const badLevel = fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('DEBUG', 'warn', ' info'), anyField).filter(
      (level) => level !== undefined && !(LOG_LEVELS as readonly unknown[]).includes(level),
    );
    fc.assert(
      fc.property(validMeta, badLevel, validHeaders, (meta, level, headers) => {
        const outcome = attempt(() => readEnvelope(rev2026Request({ _meta: { ...meta, [META_LOG_LEVEL]: level } }), headers, SUPPORTED_VERSIONS), ['invalid_envelope']);
        assert.ok(!outcome.ok, 'an invalid log level is refused');
        assertRefusal(outcome.error, 400, [-32602]);
      }),
      { numRuns: 300 },
    );
  });

  it('isStatelessMessage never throws for any JSON body and headers, and a body with the envelope is 2026-07-28', () => {
    const body = fc.oneof(
      fc.jsonValue(),
      messageLike,
      envelopeMeta.map((meta) => rev2026Request({ _meta: meta })),
      fc.array(envelopeMeta.map((meta) => rev2026Request({ _meta: meta })), { maxLength: 3 }),
    );
    const headers = withHeaders({ 'mcp-protocol-version': headerValue(versionString), 'mcp-session-id': headerValue(fc.string({ maxLength: 8 })) });
    fc.assert(
      fc.property(body, headers, fc.boolean(), (message, requestHeaders, known) => {
        const rev2026Side = isStatelessMessage(message, requestHeaders, () => known);
        assert.equal(typeof rev2026Side, 'boolean');
        const meta = isPlainObject(message) && isPlainObject(message.params) ? message.params._meta : undefined;
        if (isPlainObject(meta) && meta[META_PROTOCOL_VERSION] !== undefined) assert.equal(rev2026Side, true);
      }),
      { numRuns: 500 },
    );
  });
});

describe('wire fuzz: MCP headers', () => {
  /** A request whose name, URI and task id are one string, and headers that mostly agree with it. */
  const routingCase = fc
    .record({
      method,
      params: fc.oneof(
        { weight: 3, arbitrary: unicodeText.map((target) => ({ name: target, uri: target, taskId: target })) },
        fc.constant(undefined),
        objectWith(objectField, { name: sometimes(anyField), uri: sometimes(anyField), taskId: sometimes(anyField) }),
      ),
    })
    .chain(({ method: requestMethod, params }) => {
      const target = typeof params?.name === 'string' ? params.name : '';
      const headers = withHeaders({
        'mcp-method': headerValue(fc.oneof({ weight: 3, arbitrary: padded(fc.constant(requestMethod)) }, method)),
        'mcp-name': headerValue(fc.oneof({ weight: 3, arbitrary: padded(fc.constant(encodeSentinel(target))) }, fc.constant(target), mcpHeaderText)),
      });
      const request: JsonRpcRequest = { jsonrpc: '2.0', id: 1, method: requestMethod, params };
      return headers.map((requestHeaders) => ({ request, headers: requestHeaders }));
    });

  it('checkRoutingHeaders refuses only with header_mismatch (HTTP 400), and passes only when Mcp-Method matches', () => {
    fc.assert(
      fc.property(routingCase, ({ request, headers }) => {
        const outcome = attempt(() => checkRoutingHeaders(request, headers), ['header_mismatch']);
        if (!outcome.ok) return assertRefusal(outcome.error, 400, [-32020]);
        const given = headers['mcp-method'];
        assert.equal((Array.isArray(given) ? given[0] : given)?.trim(), request.method);
      }),
      { numRuns: 1000 },
    );
  });

  it('checkRoutingHeaders accepts a name sent base64-encoded, and refuses another one', () => {
    fc.assert(
      fc.property(fc.constantFrom(...ROUTED_METHODS), unicodeText, unicodeText, (requestMethod, name, other) => {
        const request: JsonRpcRequest = { jsonrpc: '2.0', id: 1, method: requestMethod, params: { name, uri: name, taskId: name } };
        const headersFor = (value: string): Headers => ({ 'mcp-method': ` ${requestMethod}`, 'mcp-name': `${encodeSentinel(value)}\t` });
        checkRoutingHeaders(request, headersFor(name));
        if (other !== name) assert.ok(!attempt(() => checkRoutingHeaders(request, headersFor(other)), ['header_mismatch']).ok);
      }),
      { numRuns: 300 },
    );
  });

  it('decodeHeaderValue round-trips base64 sentinels', () => {
    fc.assert(
      fc.property(unicodeText, (text) => {
        assert.equal(decodeHeaderValue(encodeSentinel(text)), text);
      }),
      { numRuns: 500 },
    );
  });

  it('decodeHeaderValue never throws anything but header_mismatch', () => {
    fc.assert(
      fc.property(fc.oneof(mcpHeaderText, fc.string({ unit: 'binary', maxLength: 20 })), (value) => {
        attempt(() => decodeHeaderValue(value), ['header_mismatch']);
      }),
      { numRuns: 500 },
    );
  });

  it('decodeHeaderValue refuses exactly the sentinels without strict base64 inside', () => {
    // Strict: whole 4-character groups of the alphabet, '=' only as up to two characters of final padding.
    const isStrictBase64 = (text: string): boolean => text.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(text);
    const inner = fc.oneof(base64Junk, unicodeText.map(toBase64), unicodeText.map((text) => toBase64(text).replace(/=+$/, '')));
    fc.assert(
      fc.property(inner, (encoded) => {
        assert.equal(attempt(() => decodeHeaderValue(`=?base64?${encoded}?=`), ['header_mismatch']).ok, isStrictBase64(encoded));
      }),
      { numRuns: 500 },
    );
  });

  it('decodeHeaderValue returns a value without the sentinel unchanged', () => {
    const isSentinel = (value: string): boolean => value.length >= 11 && value.startsWith('=?base64?') && value.endsWith('?=');
    const nearMiss = fc.oneof(
      fc.string({ maxLength: 20 }),
      unicodeText,
      fc
        .tuple(fc.constantFrom('=?base64?', '=?BASE64?', ' =?base64?', '?base64?', '=?base64'), base64Junk, fc.constantFrom('', '?', '=', '?= ', '?=x'))
        .map((parts) => parts.join('')),
    );
    fc.assert(
      fc.property(nearMiss.filter((value) => !isSentinel(value)), (value) => {
        assert.equal(decodeHeaderValue(value), value);
      }),
      { numRuns: 500 },
    );
  });
});

describe('wire fuzz: Host and Origin guard (bound to 127.0.0.1, nothing allowed beyond loopback)', () => {
  it('accepts a Host exactly when it parses as host[:port] and names loopback', () => {
    fc.assert(
      fc.property(hostLike, (host) => {
        const authority = parseHostHeader(host);
        assert.equal(hostAccepted(host), authority !== undefined && isLoopbackHostname(authority.hostname));
      }),
      { numRuns: 1000 },
    );
  });

  it('rejects look-alikes of loopback names', () => {
    const notPort = fc.string({ maxLength: 8 }).filter((junk) => junk !== '' && !/^:\d{1,5}$/.test(junk));
    const lookAlike = fc.oneof(
      fc.tuple(dnsLabel, letterTld).map(([label, tld]) => `127.${label}.${tld}`),
      fc.domain().map((domain) => `127.0.0.1.${domain}`),
      fc.domain().map((domain) => `127.0.0.1@${domain}`),
      fc.domain().map((domain) => `localhost.${domain}`),
      notPort.map((junk) => `[::1]${junk}`),
      fc
        .ipV6()
        .filter((ip) => new URL(`http://[${ip}]/`).hostname !== '[::1]')
        .map((ip) => `[${ip}]`),
      fc.integer({ min: 0, max: 0xffff }).map((group) => `[::1:${group.toString(16)}]`),
    );
    fc.assert(
      fc.property(withOptionalPort(lookAlike), (header) => {
        assert.equal(hostAccepted(header), false, `Host '${header}' must be refused`);
      }),
      { numRuns: 500 },
    );
  });

  it('accepts loopback names with or without any port', () => {
    const loopback = fc.oneof(
      fc.constantFrom('127.0.0.1', 'localhost', 'LocalHost', '[::1]', '[0:0:0:0:0:0:0:1]'),
      fc.tuple(octet, octet, octet).map((octets) => `127.${octets.join('.')}`),
    );
    fc.assert(
      fc.property(withOptionalPort(loopback), (header) => {
        assert.equal(hostAccepted(header), true, `Host '${header}' must be accepted`);
      }),
      { numRuns: 300 },
    );
  });

  it('a missing Host is refused when bound to loopback', () => {
    assert.equal(attempt(() => checkRequestOrigin(LISTEN, undefined, undefined), ['host_forbidden']).ok, false);
  });

  describe('Origin (the Host being loopback, as the Host check runs first)', () => {
    const refused = fc.oneof(
      fc.constantFrom('null', 'http://evil.com', 'http://127.0.0.1.evil.com', 'http://localhost.evil.com', 'file://', 'http://127.0.0.1/'),
      fc.domain().map((domain) => `http://127.0.0.1.${domain}`),
      fc.domain().map((domain) => `https://${domain}`),
    );
    // Browsers leave a scheme's default port out of Origin, so http://localhost:80 never arrives: not drawn.
    const loopbackOrigin = fc
      .tuple(fc.constantFrom('localhost', '127.0.0.1', '[::1]'), port.filter((p) => p !== 80))
      .map(([host, p]) => `http://${host}:${p}`);

    it('never throws anything but origin_forbidden', () => {
      fc.assert(
        fc.property(fc.oneof(refused, loopbackOrigin, fc.string({ maxLength: 30 })), (origin) => {
          originAccepted(origin);
        }),
        { numRuns: 500 },
      );
    });

    it('refuses non-loopback and opaque origins, accepts loopback ones with any non-default port', () => {
      fc.assert(
        fc.property(refused, loopbackOrigin, (bad, good) => {
          assert.equal(originAccepted(bad), false, `Origin '${bad}' must be refused`);
          assert.equal(originAccepted(good), true, `Origin '${good}' must be accepted`);
        }),
        { numRuns: 300 },
      );
    });
  });
});
