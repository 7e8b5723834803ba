// CORS on the MCP endpoint: what `listen.cors.origins` entries match, what a preflight and an answer carry, how the
// Origin guard treats listed origins, and what config load refuses. Browsers themselves: browser-cors.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { isOriginPattern, originMatcher } from '../../src/config/origins.js';
import type { ListenConfig } from '../../src/config/types.js';
import { EXPOSED_HEADERS, preflightHeaders, requestHeaderAllowed, responseHeaders } from '../../src/http/cors.js';
import { checkRequestOrigin } from '../../src/http/guards.js';
import { GatewayError } from '../../src/errors.js';

function listenWith(listenYaml: string): ListenConfig {
  return parseConfig(`listen:\n${listenYaml}\nupstreams: { a: { command: a } }\n`, 'cors.yaml', {}).listen;
}

function configErrors(listenYaml: string): { path: string; message: string }[] {
  try {
    listenWith(listenYaml);
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.errors.map((e) => ({ path: e.path, message: e.message }));
  }
  return assert.fail('expected a ConfigError');
}

describe('cors: origin patterns', () => {
  it('matches exact origins by their parsed form', () => {
    const matches = originMatcher(['https://app.example.com', 'http://127.0.0.1:5173', 'https://Default.Example:443', 'http://[::1]:3000']);
    assert.equal(matches('https://app.example.com'), true);
    assert.equal(matches('http://127.0.0.1:5173'), true);
    // The Origin header omits a default port; a pattern that spells it still matches.
    assert.equal(matches('https://default.example'), true);
    assert.equal(matches('http://[::1]:3000'), true);
    for (const refused of [
      'http://app.example.com', // scheme
      'https://app.example.com:8443', // port
      'https://app.example.com.evil.com',
      'https://evilapp.example.com',
      'https://x.app.example.com', // no wildcard: no subdomains
      'http://127.0.0.1:5174',
      'https://app.example.com/', // not an Origin header's form
      'null',
      '',
    ]) {
      assert.equal(matches(refused), false, refused);
    }
  });

  it('a "*." wildcard stands for one or more leftmost labels, never for the name itself or a look-alike', () => {
    const matches = originMatcher(['https://*.example.com']);
    assert.equal(matches('https://a.example.com'), true);
    assert.equal(matches('https://a.b.example.com'), true);
    assert.equal(matches('https://example.com'), false);
    assert.equal(matches('https://evilexample.com'), false);
    assert.equal(matches('https://a.example.com.evil.net'), false);
    assert.equal(matches('https://a.example.com:8443'), false);
    assert.equal(matches('http://a.example.com'), false);
  });

  it('a "*" port stands for any port, the default one included, on that host only', () => {
    const matches = originMatcher(['http://localhost:*']);
    assert.equal(matches('http://localhost:5173'), true);
    assert.equal(matches('http://localhost'), true);
    assert.equal(matches('http://localhost.evil.com:5173'), false);
    assert.equal(matches('https://localhost:5173'), false);
    const both = originMatcher(['https://*.dev.example:*']);
    assert.equal(both('https://a.dev.example:4443'), true);
    assert.equal(both('https://dev.example:4443'), false);
  });

  it('"*" matches every http(s) origin, and nothing that is not one', () => {
    const matches = originMatcher(['*']);
    assert.equal(matches('https://anything.example'), true);
    assert.equal(matches('null'), false);
    assert.equal(matches('file://'), false);
  });

  it('accepts only entries that are origins or the two globs', () => {
    for (const good of ['*', 'https://a.example', 'http://localhost:*', 'https://*.a.example', 'https://*.a.example:*', 'http://[::1]:8080', 'HTTPS://A.Example']) {
      assert.equal(isOriginPattern(good), true, good);
    }
    for (const bad of [
      'https://a.example/', // a path
      'https://a.example/app',
      'a.example',
      'ftp://a.example',
      'https://*a.example', // a glob inside a label
      'https://a.*.example',
      'https://*',
      'https://*.*.example',
      'https://*.127.0.0.1', // a wildcard label before an address
      'https://a.example:99999',
      'https://user@a.example',
      'https://a.example:8*',
      '*.a.example',
      '',
    ]) {
      assert.equal(isOriginPattern(bad), false, bad);
    }
  });

  it('a pattern never matches an origin whose host merely contains its name (property)', () => {
    const label = fc.stringMatching(/^[a-z0-9]{1,8}$/);
    fc.assert(
      fc.property(label, label, label, (a, b, c) => {
        const matches = originMatcher([`https://*.${b}.example`]);
        assert.equal(matches(`https://${a}.${b}.example`), true);
        assert.equal(matches(`https://${a}${b}.example`), false);
        assert.equal(matches(`https://${a}.${b}.example.${c}`), false);
        assert.equal(matches(`https://${a}.${b}.example:${c.length + 1000}`), false);
      }),
    );
  });
});

describe('cors: headers', () => {
  const listen = listenWith('  cors: { origins: ["https://app.example", "http://localhost:*"] }');

  it('allows the request headers MCP uses, Mcp-Param-* by prefix, in any case', () => {
    for (const name of ['Authorization', 'content-type', 'Accept', 'Mcp-Session-Id', 'MCP-Protocol-Version', 'Last-Event-ID', 'Mcp-Method', 'Mcp-Name', 'Mcp-Param-Region', 'mcp-param-x']) {
      assert.equal(requestHeaderAllowed(name), true, name);
    }
    for (const name of ['Cookie', 'X-Api-Key', 'Mcp-Param-', 'Mcp-Params', 'Mcp-Session', 'Host']) {
      assert.equal(requestHeaderAllowed(name), false, name);
    }
  });

  it('answers a listed origin\'s preflight with the methods, the headers it asked for that MCP uses, and the max age', () => {
    const headers = preflightHeaders(listen, 'http://localhost:5173', 'content-type, mcp-session-id,Mcp-Param-Region , mcp-protocol-version');
    assert.deepEqual(headers, {
      vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
      'access-control-allow-origin': 'http://localhost:5173',
      'access-control-allow-methods': 'GET, POST, DELETE',
      'access-control-allow-headers': 'content-type, mcp-session-id, mcp-param-region, mcp-protocol-version',
      'access-control-max-age': '600',
    });
  });

  it('leaves out of a preflight the headers MCP does not use, so the browser names what it refused', () => {
    const headers = preflightHeaders(listen, 'https://app.example', 'content-type, x-custom, cookie');
    assert.equal(headers['access-control-allow-headers'], 'content-type');
    assert.equal(preflightHeaders(listen, 'https://app.example', undefined)['access-control-allow-headers'], undefined);
  });

  it('gives an origin not listed no CORS headers, only Vary', () => {
    assert.deepEqual(preflightHeaders(listen, 'https://other.example', 'content-type'), { vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers' });
    assert.deepEqual(responseHeaders(listen, 'https://other.example'), { vary: 'Origin' });
    assert.deepEqual(responseHeaders(listen, undefined), { vary: 'Origin' });
  });

  it('echoes a listed origin on answers and exposes the session, challenge and retry headers', () => {
    assert.deepEqual(responseHeaders(listen, 'https://app.example'), {
      vary: 'Origin',
      'access-control-allow-origin': 'https://app.example',
      'access-control-expose-headers': EXPOSED_HEADERS,
    });
    assert.equal(EXPOSED_HEADERS, 'Mcp-Session-Id, WWW-Authenticate, Retry-After');
  });

  it('allows credentials only when configured, and even "*" is answered with the origin itself', () => {
    const credentialed = listenWith('  cors: { origins: ["https://app.example"], credentials: true, maxAgeSeconds: 60 }');
    assert.equal(responseHeaders(credentialed, 'https://app.example')['access-control-allow-credentials'], 'true');
    const preflight = preflightHeaders(credentialed, 'https://app.example', 'authorization');
    assert.equal(preflight['access-control-allow-credentials'], 'true');
    assert.equal(preflight['access-control-max-age'], '60');
    assert.equal(responseHeaders(listen, 'https://app.example')['access-control-allow-credentials'], undefined);
    const any = listenWith('  cors: { origins: ["*"] }');
    assert.equal(responseHeaders(any, 'https://x.example')['access-control-allow-origin'], 'https://x.example');
  });
});

describe('cors: the Origin guard', () => {
  const refused = (listen: ListenConfig, origin: string): boolean => {
    try {
      checkRequestOrigin(listen, '127.0.0.1:8080', origin);
      return false;
    } catch (error) {
      assert.ok(error instanceof GatewayError);
      return true;
    }
  };

  it('lets listed CORS origins past a loopback bind and past allowedOrigins, and nothing else', () => {
    const loopback = listenWith('  cors: { origins: ["https://*.app.example"] }');
    assert.equal(refused(loopback, 'https://ide.app.example'), false);
    assert.equal(refused(loopback, 'https://evil.example'), true);
    assert.equal(refused(loopback, 'http://127.0.0.1:3000'), false); // loopback origins pass a loopback bind, as before
    const listed = listenWith('  allowedOrigins: ["https://other.example"]\n  cors: { origins: ["https://app.example"] }');
    assert.equal(refused(listed, 'https://app.example'), false);
    assert.equal(refused(listed, 'https://other.example'), false);
    assert.equal(refused(listed, 'https://third.example'), true);
  });

  it('still checks Host for a listed origin: that is what stops DNS rebinding', () => {
    const listen = listenWith('  cors: { origins: ["https://app.example"] }');
    assert.throws(() => checkRequestOrigin(listen, 'rebound.example', 'https://app.example'), /Host 'rebound.example' is not allowed/);
  });
});

describe('cors: config', () => {
  it('is off unless configured, with defaults for the rest', () => {
    assert.equal(listenWith('  port: 8080').cors, undefined);
    assert.deepEqual(listenWith('  cors: { origins: ["https://app.example"] }').cors, { origins: ['https://app.example'], credentials: false, maxAgeSeconds: 600 });
  });

  it('refuses what is no origin pattern, an empty list, "*" with credentials and a max age over a day', () => {
    const errors = configErrors('  cors:\n    origins: ["https://a.example", "https://a.example/app", "*"]\n    credentials: true\n    maxAgeSeconds: 86401');
    assert.deepEqual(errors.map((e) => e.path), ['listen.cors.origins[1]', 'listen.cors.origins[2]', 'listen.cors.maxAgeSeconds']);
    assert.match(errors[0]?.message ?? '', /https:\/\/\*\.example\.com/);
    assert.match(errors[1]?.message ?? '', /credentials/);
    assert.match(configErrors('  cors: { origins: [] }')[0]?.message ?? '', /at least one origin/);
  });

  it('suggests the key meant', () => {
    assert.match(configErrors('  cors: { origins: ["*"], maxAge: 5 }')[0]?.message ?? '', /maxAgeSeconds/);
  });
});
