import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import { diffConfigs } from '../../src/config/diff.js';
import { parseConfig } from '../../src/config/load.js';
import { describeExclusion, exclusionOf, selectionOf, UpstreamSelection } from '../../src/gateway/tool-selection.js';

describe('tool selection: globs on the upstream\'s own names', () => {
  it('`*` is any run, `?` one character, everything else literal', () => {
    const only = (include: string[]) => (name: string) => exclusionOf({ include, exclude: [] }, name) === undefined;
    assert.equal(only(['get_*'])('get_user'), true);
    assert.equal(only(['get_*'])('get_'), true);
    assert.equal(only(['get_*'])('set_user'), false);
    assert.equal(only(['v?'])('v1'), true);
    assert.equal(only(['v?'])('v12'), false);
    assert.equal(only(['a.b'])('aXb'), false, 'a dot is a dot');
    assert.equal(only(['[ab]'])('a'), false, 'brackets are literal');
    assert.equal(only(['[ab]'])('[ab]'), true);
  });

  it('absent include means everything; exclude wins over include and says which pattern', () => {
    assert.equal(exclusionOf({ exclude: [] }, 'anything'), undefined);
    assert.deepEqual(exclusionOf({ include: ['*'], exclude: ['drop_*', 'rm'] }, 'drop_all'), { by: 'exclude', pattern: 'drop_*' });
    assert.deepEqual(exclusionOf({ include: ['read_*'], exclude: [] }, 'write'), { by: 'include' });
    assert.equal(describeExclusion({ by: 'exclude', pattern: 'drop_*' }), "excluded by 'drop_*'");
    assert.equal(describeExclusion({ by: 'include' }), 'matches no include');
  });
});

describe('tool selection: renames and overrides', () => {
  const selection = new UpstreamSelection({
    tools: {
      exclude: ['secret*'],
      overrides: {
        greet: { name: 'hello', description: 'Says hello' },
        echo: { title: 'Echo!' },
        secretive: { name: 'open' },
      },
    },
  });

  it('lists a renamed tool under its new name with the overridden title and description', () => {
    assert.deepEqual(selection.presentTool({ name: 'greet', description: 'upstream text', inputSchema: { type: 'object' } }), {
      name: 'hello',
      description: 'Says hello',
      inputSchema: { type: 'object' },
    });
    assert.deepEqual(selection.presentTool({ name: 'echo', title: 'Echo', description: 'd' }), { name: 'echo', title: 'Echo!', description: 'd' });
    assert.deepEqual(selection.presentTool({ name: 'other' }), { name: 'other' });
    assert.equal(selection.presentTool({ name: 'secret_key' }), undefined);
  });

  it('routes the new name to the upstream\'s name and knows neither the old name nor excluded ones', () => {
    assert.equal(selection.upstreamName('tools', 'hello'), 'greet');
    assert.equal(selection.upstreamName('tools', 'greet'), undefined, 'renamed away');
    assert.equal(selection.upstreamName('tools', 'echo'), 'echo');
    assert.equal(selection.upstreamName('tools', 'secret_key'), undefined);
    assert.equal(selection.upstreamName('tools', 'open'), undefined, 'an excluded tool stays excluded under a new name');
    assert.equal(selection.exposedToolName('greet'), 'hello');
    assert.equal(selection.exposedToolName('secretive'), undefined);
  });

  it('two tools may swap names', () => {
    const swap = new UpstreamSelection({ tools: { exclude: [], overrides: { a: { name: 'b' }, b: { name: 'a' } } } });
    assert.equal(swap.upstreamName('tools', 'a'), 'b');
    assert.equal(swap.upstreamName('tools', 'b'), 'a');
    assert.deepEqual(swap.presentTool({ name: 'a' }), { name: 'b' });
  });

  it('leaves tools whose names are Object.prototype keys alone', () => {
    const plain = new UpstreamSelection({});
    assert.deepEqual(plain.presentTool({ name: 'constructor' }), { name: 'constructor' });
    assert.equal(plain.upstreamName('tools', '__proto__'), '__proto__');
  });

  it('filters prompts by name and resources by URI or uriTemplate text', () => {
    const s = new UpstreamSelection({ prompts: { include: ['public_*'], exclude: [] }, resources: { exclude: ['file:///etc/*', 'secret://{id}'] } });
    assert.equal(s.exposesPrompt('public_intro'), true);
    assert.equal(s.exposesPrompt('internal'), false);
    assert.equal(s.upstreamName('prompts', 'internal'), undefined);
    assert.equal(s.upstreamName('prompts', 'public_intro'), 'public_intro');
    assert.equal(s.exposesResource('file:///etc/passwd'), false);
    assert.equal(s.exposesResource('file:///home/readme'), true);
    assert.equal(s.exposesResource('secret://{id}'), false);
  });

  it('builds one selection per upstream config', () => {
    const config = { name: 'a', prefix: 'a__', requestTimeoutMs: 0, initializeTimeoutMs: 1, taskConcurrency: 0, maxMessageBytes: 1 };
    assert.equal(selectionOf(config), selectionOf(config));
    assert.notEqual(selectionOf(config), selectionOf({ ...config }));
  });
});

describe('tool selection on reload (config diff)', () => {
  const config = (a: Record<string, unknown>) =>
    parseConfig(stringify({ upstreams: { a: { url: 'http://127.0.0.1:1/a', prefix: 'a_', ...a } } }), 'test.yaml', {});

  it('a selection-only change keeps the upstream running and names the keys', () => {
    const diff = diffConfigs(config({}), config({ tools: { exclude: ['x'] }, prompts: { include: ['p*'] } }));
    assert.deepEqual(diff.upstreams.changed, []);
    assert.deepEqual(diff.upstreams.reselected.map((u) => u.name), ['a']);
    assert.deepEqual(diff.changes, ["upstream 'a' selection changed (tools, prompts)"]);
    const renamed = diffConfigs(config({ tools: { overrides: { greet: { name: 'hello' } } } }), config({ tools: { overrides: { greet: { name: 'hi' } } } }));
    assert.deepEqual(renamed.changes, ["upstream 'a' selection changed (tools.overrides.greet.name)"]);
  });

  it('a change of connection settings replaces the upstream, its selection with it', () => {
    const diff = diffConfigs(config({}), config({ requestTimeoutMs: 5, tools: { exclude: ['x'] } }));
    assert.deepEqual(diff.upstreams.changed.map((u) => u.name), ['a']);
    assert.deepEqual(diff.upstreams.reselected, []);
  });

  it('no change, no reselection', () => {
    const same = { tools: { exclude: ['x'] } };
    assert.deepEqual(diffConfigs(config(same), config(same)).upstreams.reselected, []);
  });
});
