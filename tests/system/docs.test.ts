import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

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
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6} (.+)$/gm)) {
    // GitHub numbers a repeated heading's anchor: `usage`, `usage-1`, …
    const base = slug(m[1].trim());
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/**
 * Every relative link of a page that does not resolve: `[text](target)` (a title after the target allowed),
 * `[label]: target` definitions, and HTML `href`/`src`, outside fenced code. A target is a file or a directory
 * relative to the page; an `#anchor` must be a heading of the Markdown file it names (or of the page itself).
 */
function brokenLinks(page: string, text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, '');
  const targets = [
    ...[...prose.matchAll(/\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)/g)].map((m) => m[1]),
    ...[...prose.matchAll(/^ {0,3}\[[^\]]+\]:\s+(\S+)/gm)].map((m) => m[1]),
    ...[...prose.matchAll(/\b(?:href|src)="([^"]+)"/g)].map((m) => m[1]),
  ];
  const broken: string[] = [];
  for (const target of targets) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …
    const [file, anchor] = target.split('#');
    const resolved = file ? path.join(path.dirname(page), decodeURIComponent(file)) : page;
    if (!existsSync(resolved)) broken.push(`${page}: ${target} (no such file)`);
    else if (anchor && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) {
      broken.push(`${page}: ${target} (no such heading)`);
    }
  }
  return broken;
}

describe('the docs', () => {
  it('link only to files and headings that exist', () => {
    const broken = PAGES.flatMap((page) => brokenLinks(page, readFileSync(page, 'utf8')));
    expect(broken).toEqual([]);
  });

  it('find a broken link (the check can fail)', () => {
    const text =
      '[ok](docs/cli.md) [ok](docs/cli.md#install-it-as-a-command "title") [gone](docs/nope.md)\n' +
      '[no heading](docs/cli.md#no-such-heading) [here](#quickstart) [not here](#nowhere)\n' +
      '[def]: docs/gone-too.md\n<img src="docs/console/none.png">\n```\n[in code](nowhere.md)\n```\n';
    expect(brokenLinks('README.md', text)).toEqual([
      'README.md: docs/nope.md (no such file)',
      'README.md: docs/cli.md#no-such-heading (no such heading)',
      'README.md: #nowhere (no such heading)',
      'README.md: docs/gone-too.md (no such file)',
      'README.md: docs/console/none.png (no such file)',
    ]);
  });

  // The README is the way in — the pitch, the quickstart, a client, the console and links; the rest is in docs/.
  it('keep the README to at most 250 lines', () => {
    const lines = readFileSync('README.md', 'utf8').split('\n').length - 1;
    expect(lines, 'README.md lines (move the rest to a page of docs/)').toBeLessThanOrEqual(250);
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

// Every page that states a setting's default states the one the configuration reference (docs/configuration.md,
// written from the schema and checked against it in tests/lib/config-docs.test.ts) gives: in a table row
// (`| \`NAME\` | default |`, several names and values split by " / ") or in prose ("`NAME` (… default X …)"),
// on the pages, the CLI's help and the shipped toolset files' comments. A unit is read as the reference's
// number (`20 s` for a *_MS of 20000, `5 MiB` for a *_BYTES of 5242880).

const REFERENCE = new Map(
  [...readFileSync('docs/configuration.md', 'utf8').matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]*) \|/gm)].map(
    (m) => [m[1], m[2].trim()],
  ),
);
const UNITS: Record<string, number> = { ms: 0.001, s: 1, min: 60, h: 3600, hour: 3600, minute: 60 };
const BYTES: Record<string, number> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/** A stated default as the reference would write it: backticks off, a quantity in the setting's own unit. */
function asReference(name: string, stated: string): string {
  const value = stated.replace(/`/g, '').trim();
  const q = /^(an?|\d+(?:\.\d+)?) ?(ms|s|min|h|hour|minute|B|KiB|MiB|GiB)$/.exec(value);
  if (!q) return value;
  const n = q[1].startsWith('a') ? 1 : Number(q[1]);
  if (q[2] in BYTES) return String(n * BYTES[q[2]]);
  const seconds = n * UNITS[q[2]];
  return String(name.endsWith('_MS') ? seconds * 1000 : seconds);
}

function agrees(name: string, stated: string): boolean {
  const reference = (REFERENCE.get(name) ?? '').replace(/`/g, '');
  const value = asReference(name, stated);
  return value === reference || reference.includes(value) || value.includes(reference);
}

/** Each (setting, stated default, where) a text states. */
function statedDefaults(text: string): { name: string; stated: string; line: string }[] {
  const out: { name: string; stated: string; line: string }[] = [];
  for (const row of text.matchAll(/^\|([^|\n]+)\|([^|\n]+)\|/gm)) {
    // A settings table's first cell is nothing but the names (`A` / `B`).
    if (!/^ *`[A-Z][A-Z0-9_]+`(?: \/ `[A-Z][A-Z0-9_]+`)* *$/.test(row[1])) continue;
    const names = [...row[1].matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]);
    const values = row[2].split(' / ');
    if (names.length === 0 || names.length !== values.length || !names.every((n) => REFERENCE.has(n)))
      continue;
    names.forEach((name, i) => {
      out.push({ name, stated: values[i], line: row[0] });
    });
  }
  const names = [...REFERENCE.keys()].join('|');
  // A dot only where no space follows (a sentence ends the search), and one way to match each character: a
  // pattern that could take a dot two ways backtracks for ever on a long line (docs/ARCHITECTURE.md's table).
  const prose = new RegExp(
    String.raw`\$?\b(${names})\b` +
      String.raw`\x60?(?:[^\n|.]|\.(?! ))*?\((?:[^()\n]*?default:? ([^)\n,;]+)|([^()\n]+) unless set)\)`,
    'g',
  );
  for (const m of text.matchAll(prose)) {
    if (m[0].includes('. ')) continue;
    out.push({ name: m[1], stated: (m[2] ?? m[3]).trim(), line: m[0] });
  }
  const inline = /`([A-Z][A-Z0-9_]{3,})`,? default ([^\n,;.)]+(?:\.\d+)?)/g;
  for (const m of text.matchAll(inline)) {
    if (REFERENCE.has(m[1])) out.push({ name: m[1], stated: m[2].trim(), line: m[0] });
  }
  return out;
}

describe('documented defaults', () => {
  it('are the defaults the configuration reference gives', () => {
    const places = [
      ...PAGES.filter((p) => p !== 'docs/configuration.md'),
      'cli/help.ts',
      ...readdirSync('toolsets').map((f) => `toolsets/${f}`),
    ];
    const wrong: string[] = [];
    for (const place of places) {
      for (const { name, stated, line } of statedDefaults(readFileSync(place, 'utf8'))) {
        if (!agrees(name, stated)) {
          wrong.push(
            `${place}: ${name} stated as "${stated}", the reference says "${REFERENCE.get(name)}" (${line})`,
          );
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('are found where a page states one (the check can fail)', () => {
    const stated = statedDefaults(
      '| `FS_ROOTS` | `./workspace` |\n`FETCH_TIMEOUT_MS`, default 20 s\nTOOLSHIFT_DATA_DIR keeps x.json (default ./data)\n' +
        'YAML files in `TOOLSETS_DIR` (default `./toolsets`)\n',
    );
    expect(stated.map((s) => [s.name, agrees(s.name, s.stated)])).toEqual([
      ['FS_ROOTS', false],
      ['TOOLSHIFT_DATA_DIR', false],
      ['TOOLSETS_DIR', false],
      ['FETCH_TIMEOUT_MS', true],
    ]);
  });
});

// docs/toolsets.md describes each native toolset: it names every tool the toolset's file lists, and the count it
// states is the file's, so a new tool fails here until the page describes it.
describe('docs/toolsets.md', () => {
  it('names every native tool of each shipped toolset, and states their number', () => {
    const page = readFileSync('docs/toolsets.md', 'utf8');
    const missing: string[] = [];
    for (const file of readdirSync('toolsets').filter((f) => f.endsWith('.yaml'))) {
      const toolset = parse(readFileSync(`toolsets/${file}`, 'utf8')) as {
        id?: string;
        backend?: string;
        tools?: string[];
      };
      if (toolset.backend !== 'tool-server' || !toolset.id || !toolset.tools) continue;
      for (const tool of toolset.tools)
        if (!page.includes(`\`${tool}\``)) missing.push(`${toolset.id}: ${tool}`);
      const count = new RegExp(`\`${toolset.id}\` \\((\\d+) tools\\)`).exec(page);
      if (count && Number(count[1]) !== toolset.tools.length) {
        missing.push(
          `${toolset.id}: the page says ${count[1]} tools, its file lists ${toolset.tools.length}`,
        );
      }
    }
    expect(missing).toEqual([]);
  });
});

// docs/benchmarks.md's table of the committed run restates BENCHMARKS.md, the run `npm run bench` wrote: every
// figure it gives for that run is one BENCHMARKS.md has, to the digits shown (a clause about an earlier run,
// "… in the run before", aside). A new run that changes a figure fails here until the page says what it measured.

/** The numbers of a text, commas dropped; not the digits of a name (`t01`, `o200k_base`). */
const numbers = (text: string) =>
  [...text.matchAll(/(?<![\w.])\d[\d,]*(?:\.\d+)?/g)].map((m) => m[0].replace(/,/g, ''));

/** True when `stated` is one of `run`'s numbers (or a number of milliseconds in seconds) at its precision. */
function fromRun(stated: string, run: string[]): boolean {
  const digits = stated.split('.')[1]?.length ?? 0;
  const scale = 10 ** digits;
  const rounded = (n: number) => Math.round(n * scale + 1e-9) / scale;
  return run.some(
    (r) => rounded(Number(r)) === Number(stated) || rounded(Number(r) / 1000) === Number(stated),
  );
}

/** Each figure of the page's committed-run table that BENCHMARKS.md does not have. */
function unmeasured(page: string, benchmarks: string): string[] {
  const run = numbers(benchmarks);
  const start = page.indexOf('From the run committed with this version');
  const table = page.slice(start).split('\n\n')[1] ?? '';
  const out: string[] = [];
  const rows = table
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .slice(2);
  if (rows.length === 0) throw new Error('docs/benchmarks.md has no table of the committed run');
  for (const row of rows) {
    const [, figure, measured] = row.split('|');
    const thisRun = measured
      .split(/[;()]/)
      .filter((clause) => !/\bbefore\b/.test(clause))
      .join(' ');
    for (const n of numbers(thisRun)) if (!fromRun(n, run)) out.push(`${figure.trim()}: ${n}`);
  }
  return out;
}

describe('docs/benchmarks.md', () => {
  it('states, for the committed run, the figures BENCHMARKS.md has', () => {
    const page = readFileSync('docs/benchmarks.md', 'utf8');
    expect(page).toContain('From the run committed with this version');
    expect(unmeasured(page, readFileSync('BENCHMARKS.md', 'utf8'))).toEqual([]);
  });

  it('finds a figure the run did not measure (the check can fail)', () => {
    const page =
      'From the run committed with this version:\n\n| figure | measured | goal |\n|---|---|---|\n' +
      '| a | 1.77 s vs 2.26 s (0.79×; 0.70× in the run before) | ≤ 1 |\n| b | 4.1 s; 3.9 ms | – |\n';
    expect(unmeasured(page, 'ready 1773.06 ms vs 2255.23 ms, 0.79; p99 4.05 s; 3.74 ms')).toEqual(['b: 3.9']);
  });
});
