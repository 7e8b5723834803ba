// Resource URIs as rules see them (src/config/resource-uri.ts): the RFC 3986 §6.2.2 normal form the rules are
// matched on, the spellings refused before any template is tried, and rules (`resources.exclude`,
// `auth.access[].resources`) matched on normal forms, with the spellings of issue 39's probe. The same spellings
// against a gateway process and a recording upstream: test/integration/resource-rules.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mayUse } from '../../src/config/access.js';
import { hasDotSegment, normalizeUri, spellingProblem, uriGlobMatches } from '../../src/config/resource-uri.js';
import { UpstreamSelection } from '../../src/gateway/tool-selection.js';

/** The probe's spellings of /etc/passwd, each of which a file server resolves to it. */
const PASSWD_SPELLINGS = [
  'file:///%65tc/passwd',
  'file:///public/../etc/passwd',
  'file:///public/%2e%2e/etc/passwd',
  'file:///public/%2E%2E/etc/passwd',
  'file:///public/./../etc/passwd',
  'FILE:///etc/passwd',
  'file:///etc/%70asswd',
];

describe('the normal form of a resource URI (RFC 3986 §6.2.2)', () => {
  const cases: [string, string][] = [
    ['file:///%65tc/passwd', 'file:///etc/passwd'],
    ['file:///public/../etc/passwd', 'file:///etc/passwd'],
    ['file:///public/%2e%2e/etc/passwd', 'file:///etc/passwd'],
    ['file:///public/%2E%2E%2Fetc/passwd', 'file:///public/..%2Fetc/passwd'],
    ['file:///public/..%2fetc/passwd', 'file:///public/..%2Fetc/passwd'],
    ['file:///a/./b/../c/', 'file:///a/c/'],
    ['file:///a/..', 'file:///'],
    ['file:///..', 'file:///'],
    ['HTTPS://User@Example.COM:8443/A/%7euser?Q=%2f#F', 'https://User@example.com:8443/A/~user?Q=%2F#F'],
    ['test://item/%34%32', 'test://item/42'],
    ['urn:example:a/../b', 'urn:example:a/../b'],
    ['file:///public/*', 'file:///public/*'],
    ['test://item/{id}', 'test://item/{id}'],
  ];
  for (const [uri, normal] of cases) it(`${uri} → ${normal}`, () => assert.equal(normalizeUri(uri), normal));
  it('is idempotent', () => {
    for (const [uri] of cases) assert.equal(normalizeUri(normalizeUri(uri)), normalizeUri(uri));
  });
});

describe('spellings refused before any template', () => {
  const refused = [
    'file:///%65tc/passwd',
    'file:///public/../etc/passwd',
    'file:///public/%2e%2e/etc/passwd',
    'file:///public/%2E%2E%2Fetc/passwd',
    'file:///public/..%2fetc/passwd',
    'file:///public/./notes.txt',
    'file:///public/..',
    'test://item/%7e',
  ];
  for (const uri of refused) it(`refuses ${uri}`, () => assert.notEqual(spellingProblem(uri), undefined));
  const accepted = ['file:///public/notes.txt', 'file:///public/a..b', 'file:///public/a%20b', 'test://item/a%2Fb', 'test://item/42?x=..', 'FILE:///etc/passwd'];
  for (const uri of accepted) it(`accepts ${uri}`, () => assert.equal(spellingProblem(uri), undefined));
  // Normal already (`..%2Fetc` is one segment), yet no template matches it: expressions never take an encoded
  // slash (test/unit/listed-lookup.test.ts).
  it('leaves an encoded slash to the templates', () => assert.equal(spellingProblem('file:///public/..%2Fetc/passwd'), undefined));
  it('finds dot segments in the path only', () => {
    assert.equal(hasDotSegment('file:///a/../b'), true);
    assert.equal(hasDotSegment('file:///a/b?up=../..'), false);
    assert.equal(hasDotSegment('file:///a/b#..'), false);
  });
});

describe('rules on URIs are matched on normal forms', () => {
  it('resources.exclude hides every spelling of what it names', () => {
    const selection = new UpstreamSelection({ resources: { exclude: ['file:///etc/*'] } });
    for (const uri of PASSWD_SPELLINGS) assert.equal(selection.exposesResource(uri), false, uri);
    assert.equal(selection.exposesResource('file:///public/notes.txt'), true);
  });

  it('resources.include exposes no other spelling than what it names', () => {
    const selection = new UpstreamSelection({ resources: { include: ['file:///public/*'], exclude: [] } });
    for (const uri of PASSWD_SPELLINGS) assert.equal(selection.exposesResource(uri), false, uri);
    assert.equal(selection.exposesResource('file:///public/notes.txt'), true);
    assert.equal(selection.exposesResource('file:///%70ublic/notes.txt'), true, 'the same resource, spelled otherwise');
  });

  it('auth.access grants a spelling only what its normal form is granted', () => {
    const rules = [{ principals: ['alice'], scopes: [], tools: [], prompts: [], resources: ['file:///public/*'] }];
    const alice = { credential: 'key' as const, name: 'alice', scopes: [] };
    for (const uri of PASSWD_SPELLINGS) assert.equal(mayUse(rules, alice, 'resources', uri), false, uri);
    assert.equal(mayUse(rules, alice, 'resources', 'file:///public/notes.txt'), true);
    assert.equal(mayUse(rules, alice, 'resources', 'file:///public/%2e%2e/etc/passwd'), false);
  });

  it('compares scheme and host without case, in globs too', () => {
    assert.equal(uriGlobMatches('https://Internal.Example.com/*', 'HTTPS://internal.example.COM/x'), true);
    assert.equal(uriGlobMatches('https://internal.example.com/*', 'https://internal.example.com.evil/x'), false);
    assert.equal(uriGlobMatches('file:///A/*', 'file:///a/x'), false, 'paths keep their case');
  });
});
