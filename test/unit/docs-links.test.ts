// The README and docs/ link to each other by file and heading: every relative link must find its file, and every
// `#anchor` a heading of that file (as GitHub makes anchors), so moving a section cannot leave readers at a dead end.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DOCS = [join(ROOT, 'README.md'), ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join(ROOT, 'docs', f))];

/** Markdown without its fenced code blocks (a `#` line there is a comment, a `](` is code). */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '');
}

/** GitHub's anchors of a file's headings. */
function anchors(file: string): Set<string> {
  const found = new Set<string>();
  for (const [, heading] of prose(readFileSync(file, 'utf8')).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading!.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-');
    found.add(slug);
  }
  return found;
}

describe('documentation links', () => {
  it('every relative link in README.md and docs/ finds its file and heading', () => {
    const broken: string[] = [];
    for (const file of DOCS) {
      for (const [, target] of prose(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue; // http:, https:, mailto:
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const linked = path === '' ? file : resolve(dirname(file), path);
        const where = `${relative(ROOT, file)} → ${target}`;
        if (!existsSync(linked)) broken.push(`${where}: no such file`);
        else if (anchor !== undefined && linked.endsWith('.md') && !anchors(linked).has(anchor)) broken.push(`${where}: no such heading`);
      }
    }
    assert.deepEqual(broken, []);
  });
});
