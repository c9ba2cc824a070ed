import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// The docs cite the code: every link and every repository path they name must exist, so a move or a rename
// that forgets a page fails here instead of misleading a reader.

const PAGES = ['README.md', 'CONTRIBUTING.md', ...readdirSync('docs').map((f) => `docs/${f}`)].filter((f) =>
  f.endsWith('.md'),
);
const TOP = [
  'agent-server',
  'mcp-gateway',
  'tool-server',
  'lib',
  'cli',
  'bench',
  'scripts',
  'tests',
  'toolsets',
  'prompts',
  'docs',
  'bin',
];

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

function anchors(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1].trim())));
}

describe('the docs', () => {
  it('link only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      const text = readFileSync(page, 'utf8');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(https?:|mailto:)/.test(target)) continue;
        const [file, anchor] = target.split('#');
        const resolved = file ? path.join(path.dirname(page), file) : page;
        if (!existsSync(resolved)) broken.push(`${page}: ${target} (no such file)`);
        else if (anchor && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) {
          broken.push(`${page}: ${target} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('name only repository paths that exist', () => {
    const missing: string[] = [];
    for (const page of PAGES) {
      const text = readFileSync(page, 'utf8');
      for (const [, cited] of text.matchAll(/`([A-Za-z0-9_./-]+)`/g)) {
        const first = cited.split('/')[0];
        // A path names a file (an extension) or a folder (a trailing slash); `prompts/list` is an MCP method.
        const looksLikePath = /\.[a-z]{2,4}(:\d+)?$|\/$/.test(cited);
        if (!looksLikePath || !TOP.includes(first) || /node_modules/.test(cited)) continue;
        const file = cited.replace(/:\d+$/, '');
        if (!existsSync(file)) missing.push(`${page}: ${cited}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
