// A per-principal stdio child's env with its caller filled in (issue 33): what each placeholder becomes, what is
// made safe, and that an error names the variable, never the value.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChildEnvError, MAX_PLACEHOLDER_CHARS, renderChildEnv, type ChildCaller } from '../../src/upstream/life/child-env.js';

const alice: ChildCaller = {
  principal: 'oauth:https://idp.example#alice',
  claims: { email: 'alice@example.com', groups: ['dev', 'ops'], admin: true, level: 3, nested: { a: 1 } },
  upstreamToken: async () => 'tok-alice',
};

describe('child env placeholders', () => {
  it('fills in the principal, claims and the upstream token, and keeps literal text around them', async () => {
    const env = await renderChildEnv(
      {
        USER_ID: '{{principal}}',
        EMAIL: 'mailto:{{ claims.email }}',
        GROUPS: '{{claims.groups}}',
        FLAGS: '{{claims.admin}}/{{claims.level}}',
        TOKEN: 'Bearer {{upstreamToken}}',
        PLAIN: 'no placeholders here',
      },
      alice,
    );
    assert.deepEqual(env, {
      USER_ID: 'oauth:https://idp.example#alice',
      EMAIL: 'mailto:alice@example.com',
      GROUPS: 'dev,ops',
      FLAGS: 'true/3',
      TOKEN: 'Bearer tok-alice',
      PLAIN: 'no placeholders here',
    });
  });

  it('puts nothing for a claim the caller lacks or that has no text, and for the anonymous principal', async () => {
    const env = await renderChildEnv({ A: '[{{claims.missing}}]', B: '[{{claims.nested}}]', C: '[{{principal}}]' }, { principal: '', claims: alice.claims });
    assert.deepEqual(env, { A: '[]', B: '[]', C: '[]' });
  });

  it('strips CR, LF and NUL from what it inserts', async () => {
    const env = await renderChildEnv({ EMAIL: '{{claims.email}}', TOKEN: '{{upstreamToken}}' }, {
      principal: 'key:eve',
      claims: { email: 'eve@example.com\r\nX-Injected: 1\u0000' },
      upstreamToken: async () => 'tok\nen',
    });
    assert.deepEqual(env, { EMAIL: 'eve@example.comX-Injected: 1', TOKEN: 'token' });
  });

  it('asks for the upstream token once, and only when a value names it', async () => {
    let asked = 0;
    const caller: ChildCaller = { principal: 'key:a', claims: {}, upstreamToken: async () => `t${++asked}` };
    await renderChildEnv({ A: '{{principal}}' }, caller);
    assert.equal(asked, 0);
    const env = await renderChildEnv({ A: '{{upstreamToken}}', B: 'x{{upstreamToken}}' }, caller);
    assert.deepEqual(env, { A: 't1', B: 'xt1' });
    assert.equal(asked, 1);
  });

  it('refuses a value over the cap and a missing token, naming the variable but not the value', async () => {
    const secret = 's'.repeat(MAX_PLACEHOLDER_CHARS + 1);
    await assert.rejects(renderChildEnv({ BIG: '{{upstreamToken}}' }, { principal: 'key:a', claims: {}, upstreamToken: async () => secret }), (error: Error) => {
      assert.ok(error instanceof ChildEnvError);
      assert.match(error.message, /env BIG: \{\{upstreamToken\}\} is longer than 16384 characters/);
      assert.ok(!error.message.includes('sss'));
      return true;
    });
    await assert.rejects(renderChildEnv({ TOKEN: '{{upstreamToken}}' }, { principal: 'key:a', claims: {} }), /env TOKEN: no upstream token for this caller/);
    await assert.rejects(renderChildEnv({ TOKEN: '{{upstreamToken}}' }, { principal: 'key:a', claims: {}, upstreamToken: async () => undefined }), /env TOKEN: no upstream token/);
  });

  it('refuses an unknown placeholder (a config built in code skips the loader)', async () => {
    await assert.rejects(renderChildEnv({ X: '{{who}}' }, alice), /env X: unknown placeholder "\{\{who\}\}"/);
  });
});
