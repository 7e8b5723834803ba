// Identity edges that are pure logic: qualified principals and how rules name them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mayUse, principalMatches } from '../../src/config/access.js';
import type { AccessRule } from '../../src/config/types.js';
import { apiKeyCaller, nameOf, oauthCaller, sessionOfPrincipal } from '../../src/tasks/principals.js';

const ISSUER = 'https://idp.example.com/realms/mcp';

describe('principals are full identities', () => {
  it('an API key and an OAuth subject of the same name are different principals, and neither is a session', () => {
    const key = apiKeyCaller('alice', []);
    const token = oauthCaller(ISSUER, 'alice', ['mcp']);
    assert.notEqual(key.principal, token.principal);
    assert.equal(key.principal, 'key:alice');
    assert.equal(token.principal, `oauth:${ISSUER}#alice`);
    assert.notEqual(oauthCaller('https://other.example', 'alice', []).principal, token.principal, 'another issuer, another principal');
    for (const name of ['session:abc', 'modern:anonymous', 'gateway:native-tasks', 'anonymous']) {
      assert.equal(sessionOfPrincipal(apiKeyCaller(name, []).principal), undefined, name);
      assert.equal(sessionOfPrincipal(oauthCaller(ISSUER, name, []).principal), undefined, name);
    }
  });

  it('a principal string gives back the credential and name rules match, whatever the subject holds', () => {
    for (const sub of ['alice', 'a#b', 'key:x', 'oauth:y', 'ü 🙂', '']) {
      assert.deepEqual(nameOf(oauthCaller(ISSUER, sub, []).principal), { credential: 'oauth', name: sub });
      assert.deepEqual(nameOf(apiKeyCaller(sub, []).principal), { credential: 'key', name: sub });
    }
    for (const other of ['session:s1', 'modern:anonymous', 'gateway:native-tasks', 'anonymous', 'alice']) assert.equal(nameOf(other), undefined, other);
  });

  it('rules name a principal bare (either credential) or qualified (one), with globs on both forms', () => {
    const key = { credential: 'key', name: 'alice' } as const;
    const token = { credential: 'oauth', name: 'alice' } as const;
    assert.ok(principalMatches('alice', key) && principalMatches('alice', token));
    assert.ok(principalMatches('key:alice', key) && !principalMatches('key:alice', token));
    assert.ok(principalMatches('oauth:alice', token) && !principalMatches('oauth:alice', key));
    assert.ok(principalMatches('key:al*', key) && !principalMatches('key:al*', token));
    assert.ok(principalMatches('oauth:*', token) && !principalMatches('oauth:*', key));
    assert.ok(principalMatches('*', key) && principalMatches('*', token));
    assert.ok(!principalMatches('bob', key) && !principalMatches('oauth:bob', token));
  });

  it('access rules follow: a grant to key:alice is not a grant to the OAuth subject alice', () => {
    const rules: AccessRule[] = [
      { principals: ['key:alice'], scopes: [], tools: ['*'], prompts: [], resources: [] },
      { principals: ['oauth:carol', 'dave'], scopes: [], tools: ['greet'], prompts: [], resources: [] },
    ];
    const tools = (caller: ReturnType<typeof apiKeyCaller>): string[] => ['greet', 'crash'].filter((tool) => mayUse(rules, caller, 'tools', tool));
    assert.deepEqual(tools(apiKeyCaller('alice', [])), ['greet', 'crash']);
    assert.deepEqual(tools(oauthCaller(ISSUER, 'alice', [])), []);
    assert.deepEqual(tools(oauthCaller(ISSUER, 'carol', [])), ['greet']);
    assert.deepEqual(tools(apiKeyCaller('carol', [])), []);
    assert.deepEqual(tools(apiKeyCaller('dave', [])), ['greet']);
    assert.deepEqual(tools(oauthCaller(ISSUER, 'dave', [])), ['greet']);
  });
});
