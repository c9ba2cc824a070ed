import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// Issue 34: a test waits for a condition (expect.poll, vi.waitFor, a loop with a deadline), or runs on fake
// timers or an injected clock; it never sleeps a fixed 200 ms or more hoping something has happened by then.
// This reads every test file and helper for the usual shapes of such a sleep.

/** `await new Promise((r) => setTimeout(r, 300))`, `setTimeout(resolve, 2_000)`, `await delay(2200)`, `sleep(500)`. */
const SLEEP =
  /setTimeout\(\s*(?:r|res|resolve|done)\s*,\s*([\d_]+)\s*\)|\b(?:delay|sleep|pause)\(\s*([\d_]+)\s*\)/g;

function sleepsIn(file: string): string[] {
  const found: string[] = [];
  const lines = readFileSync(file, 'utf8').split('\n');
  for (const [i, line] of lines.entries()) {
    for (const m of line.matchAll(SLEEP)) {
      const ms = Number((m[1] ?? m[2]).replaceAll('_', ''));
      if (ms >= 200) found.push(`${file}:${i + 1}: ${line.trim()}`);
    }
  }
  return found;
}

describe('the tests', () => {
  it('never sleep a fixed 200 ms or more', () => {
    // Files only, none installed: a run may have put packages under tests/ (a folder named `ipaddr.js`).
    const files = readdirSync('tests', { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && /\.(ts|mts|mjs|js)$/.test(e.name))
      .map((e) => path.join(e.parentPath, e.name))
      .filter(
        (f) => !f.startsWith(path.join('tests', 'fixtures')) && !f.split(path.sep).includes('node_modules'),
      )
      // This file names the shapes it looks for.
      .filter((f) => f !== path.join('tests', 'system', 'no-fixed-sleeps.test.ts'));
    expect(files.length).toBeGreaterThan(100);
    const found = files.flatMap(sleepsIn);
    expect(found).toEqual([]);
  });

  it('see a sleep in the shapes they look for', () => {
    const probe = (line: string) =>
      [...line.matchAll(SLEEP)].map((m) => Number((m[1] ?? m[2]).replaceAll('_', '')));
    expect(probe('await new Promise((r) => setTimeout(r, 2_500));')).toEqual([2500]);
    expect(probe('await delay(2200);')).toEqual([2200]);
    expect(probe('await new Promise((resolve) => setTimeout(resolve, 50));')).toEqual([50]);
    expect(probe("await delay('infinite');")).toEqual([]);
  });
});
