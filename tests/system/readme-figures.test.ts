import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cliWith } from '../helpers/cli.ts';
import { answer, call, calls, ScriptedModel } from '../helpers/scripted-model.ts';
import { makeStack } from '../helpers/stack.ts';

// The README's example of `toolshift run` is checked against what the CLI prints today for the same task on
// the shipped toolsets: every token figure, tool count and line must be what a user sees. Only what depends on
// the model and the clock (ids, durations, the provider's usage, the model's name) is left out of the match.

/** The README's fenced blocks, in order. */
function fencedBlocks(markdown: string): string[] {
  const blocks: string[] = [];
  let open: string[] | undefined;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) {
      if (open) blocks.push(open.join('\n'));
      open = open ? undefined : [];
    } else open?.push(line);
  }
  return blocks;
}

/** The README's example run: the fenced block with the run's summary. */
function readmeExample(): string {
  const block = fencedBlocks(readFileSync('README.md', 'utf8')).find((b) => /^✔ completed in/m.test(b));
  if (!block) throw new Error('README.md has no example run (a fenced block with "✔ completed in")');
  return block;
}

/**
 * Puts what the CLI printed in place of the README's example, line by line: a line that differs only in what
 * varies run to run (ids, times, the model's usage) stays as the README has it.
 */
function rewriteExample(printed: string): void {
  const readme = readFileSync('README.md', 'utf8');
  const old = readmeExample();
  const shown = (text: string) => text.split('\n').filter((line) => normalise(line).length > 0);
  const before = shown(old);
  const now = shown(printed).map((line, i) =>
    before.length === shown(printed).length && normalise(before[i])[0] === normalise(line)[0]
      ? before[i]
      : line,
  );
  writeFileSync('README.md', readme.replace(old, now.join('\n')));
}

/** What varies run to run, made the same on both sides. */
function normalise(text: string): string[] {
  return text
    .replace(/\btask_[0-9a-f…-]+/g, 'task_…')
    .replace(/\bses_[0-9a-f…-]+/g, 'ses_…')
    .replace(/\bthr_[0-9a-f…-]+/g, 'thr_…')
    .replace(/^(task task_… · session ses_… · model ).*$/m, '$1<model>')
    .replace(/[\d,]+ tokens \(prompt [\d,]+, completion [\d,]+\)/g, '<usage>')
    .replace(/\b\d+(?:\.\d)?s\b|\b\d+ ms\b/g, '<time>')
    .split('\n')
    .filter((line) => line !== '' && !/asking the model/.test(line));
}

describe('the README', () => {
  it('shows what toolshift run prints for its example task today', async () => {
    const goal = 'Create notes/ideas.md with three ideas for a weekend project';
    // As `npm start` runs it, goal priming on: the file tools are active before the model is asked, so its
    // first reply writes the file.
    const model = new ScriptedModel([
      calls(call('write_file', { path: 'notes/ideas.md', content: '1. A hike\n2. Bread\n3. A kite\n' })),
      answer('I created notes/ideas.md with three ideas.'),
    ]);
    const s = await makeStack({ model, prime: true });
    try {
      let seen = '';
      const write = (t: string) => {
        seen += t;
      };
      const res = await cliWith({ stdout: write, stderr: write }, s, 'run', goal);
      expect(res.code).toBe(0);
      // `npm run snapshots` puts what the CLI prints now in the README (a new tool changes its figures);
      // otherwise "Expected" is what it prints, and the README must show it.
      if (process.env.TOOLSHIFT_UPDATE_README === '1') rewriteExample(seen);
      expect(normalise(readmeExample())).toEqual(normalise(seen));
    } finally {
      await s.close();
    }
  });
});
