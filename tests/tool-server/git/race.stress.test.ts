import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '../../../tool-server/contract.ts';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import type { GitToolContext } from '../../../tool-server/tools/git/context.ts';
import { gitTools } from '../../../tool-server/tools/git/tools.ts';
import { commit, type GitWorld, git, initRepo } from './fixtures.ts';

// The git race of the adversarial review, for real: a worker thread swaps a directory the git tools checked
// for a symlink to a directory outside the roots (5 ms in place, 2 ms swapped), while git_status, git_diff,
// git_log, git_show and git_branches run against the repository under it. Outside, at the same relative
// place, is a repository of the same shape whose every commit, file, branch and path says OUTSIDE, so any
// answer that came from there, or names where the swapped link points, shows. A second run swaps rarely
// (150 ms in place), so calls get answered while swaps happen. Each run is bounded: ROUNDS rounds or
// DEADLINE_MS, whichever comes first.

const ROUNDS = 40;
const DEADLINE_MS = 2000;

/** Swaps `dir` for `link` (a symlink leading outside) and back, until told to stop; counts the swaps. */
const SWAPPER = `
const { workerData } = require('node:worker_threads');
const fs = require('node:fs');
const { dir, held, link, flags, inPlaceMs, swappedMs } = workerData;
const nap = new Int32Array(new SharedArrayBuffer(4));
const sleep = (ms) => Atomics.wait(nap, 0, 0, ms);
Atomics.store(flags, 2, 1);
while (Atomics.load(flags, 0) === 0) {
  fs.renameSync(dir, held);
  fs.renameSync(link, dir);
  Atomics.add(flags, 1, 1);
  sleep(swappedMs);
  fs.renameSync(dir, link);
  fs.renameSync(held, dir);
  sleep(inPlaceMs);
}
`;

let base: string;
let world: GitWorld;
let insideHead: string;

/** A repository at `dir` whose content, history and names all carry `mark`, with staged and unstaged changes. */
async function markedRepo(dir: string, mark: string): Promise<string> {
  await initRepo(world, dir);
  git(world, dir, ['config', 'user.name', `${mark} author`]);
  await commit(world, dir, { 'a.txt': `${mark} one\n`, 'src/b.txt': `${mark} bee\n` }, `${mark} first`);
  const head = await commit(world, dir, { 'a.txt': `${mark} two\n` }, `${mark} second`);
  git(world, dir, ['branch', `${mark}-branch`]);
  await writeFile(path.join(dir, 'src/b.txt'), `${mark} staged\n`);
  git(world, dir, ['add', 'src/b.txt']);
  await writeFile(path.join(dir, 'a.txt'), `${mark} unstaged\n`);
  await writeFile(path.join(dir, `${mark}-untracked.txt`), `${mark}\n`);
  return head;
}

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'git-race-')));
  const root = path.join(base, 'ws');
  const outside = path.join(base, 'OUTSIDE-zone');
  const home = path.join(base, 'home');
  for (const d of [root, outside, home]) await mkdir(d, { recursive: true });
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home };
  const paths = await PathGuard.create({ roots: [root], readOnlyRoots: [] });
  const ctx: GitToolContext = { paths, maxReadBytes: 64 * 1024, git: { env, timeoutMs: 20_000 } };
  world = { base, root, home, outside, env, ctx, cleanup: () => rm(base, { recursive: true, force: true }) };
  insideHead = await markedRepo(path.join(root, 'd', 'repo'), 'inside');
  await markedRepo(path.join(outside, 'repo'), 'OUTSIDE');
  await symlink(outside, path.join(root, 'swap-link'));
});

afterAll(async () => {
  await world.cleanup();
});

/** The calls of one round: every git tool, on the repository under the swapped directory. */
const CALLS: [string, Record<string, unknown>][] = [
  ['git_status', { repository: 'd/repo' }],
  ['git_diff', { repository: 'd/repo' }],
  ['git_diff', { repository: 'd/repo', staged: true }],
  ['git_diff', { repository: 'd/repo', from: 'HEAD~1', to: 'HEAD' }],
  ['git_log', { repository: 'd/repo' }],
  ['git_show', { repository: 'd/repo', ref: 'HEAD' }],
  ['git_branches', { repository: 'd/repo' }],
];

/** What one run under the swapper saw. */
interface RaceStats {
  rounds: number;
  calls: number;
  answered: number;
  /** Answered calls during which at least one swap happened (so git was pinned, not lucky). */
  answeredAcrossSwaps: number;
  swaps: number;
  refusals: Record<'changed' | 'outside' | 'missing', number>;
  /** Results or errors that carry anything from outside (content, history, names, the outward path). */
  outside: string[];
  /** Refusals of another kind than the expected three. */
  others: string[];
}

/** Runs the calls in rounds while a worker swaps ws/d for the outward link with the given rhythm. */
async function underSwaps(inPlaceMs: number, swappedMs: number): Promise<RaceStats> {
  const { ctx, root } = world;
  const registry = createRegistry(gitTools);
  const flags = new Int32Array(new SharedArrayBuffer(12)); // [stop, swaps, started]
  const worker = new Worker(SWAPPER, {
    eval: true,
    workerData: {
      dir: path.join(root, 'd'),
      held: path.join(root, '.held-d'),
      link: path.join(root, 'swap-link'),
      flags,
      inPlaceMs,
      swappedMs,
    },
  });
  const exited = new Promise<number>((resolve, reject) => {
    worker.on('exit', resolve);
    worker.on('error', reject);
  });
  while (Atomics.load(flags, 2) === 0) await new Promise((r) => setTimeout(r, 1));

  const stats: RaceStats = {
    rounds: 0,
    calls: 0,
    answered: 0,
    answeredAcrossSwaps: 0,
    swaps: 0,
    refusals: { changed: 0, outside: 0, missing: 0 },
    outside: [],
    others: [],
  };
  const call = async (name: string, args: Record<string, unknown>): Promise<void> => {
    stats.calls++;
    const swapsBefore = Atomics.load(flags, 1);
    const r: ToolResult = await registry.call(name, args, ctx);
    const shown = JSON.stringify(r);
    if (shown.includes('OUTSIDE')) stats.outside.push(`${name}: ${shown.slice(0, 300)}`);
    const error = r.error ?? '';
    if (r.success) {
      stats.answered++;
      if (Atomics.load(flags, 1) !== swapsBefore) stats.answeredAcrossSwaps++;
    } else if (/changed while/.test(error)) stats.refusals.changed++;
    else if (/outside the allowed directories/.test(error)) stats.refusals.outside++;
    else if (/No such directory|not inside a git repository/.test(error)) stats.refusals.missing++;
    else stats.others.push(error);
  };
  const swapsAtStart = Atomics.load(flags, 1);
  const started = performance.now();
  for (; stats.rounds < ROUNDS && performance.now() - started < DEADLINE_MS; stats.rounds++) {
    await Promise.all(CALLS.map(([name, args]) => call(name, args)));
  }
  const elapsedMs = Math.round(performance.now() - started);
  stats.swaps = Atomics.load(flags, 1) - swapsAtStart;
  Atomics.store(flags, 0, 1);
  expect(await exited).toBe(0);
  const { changed, outside, missing } = stats.refusals;
  console.info(
    `git race (${inPlaceMs} ms in place, ${swappedMs} ms swapped): ${stats.rounds} rounds, ${stats.calls} ` +
      `calls, ${stats.swaps} swaps in ${elapsedMs} ms; answered ${stats.answered} (${stats.answeredAcrossSwaps} ` +
      `while swaps happened); refused: changed ${changed}, outside ${outside}, missing ${missing}, other ` +
      `${stats.others.length}; answers or errors from outside: ${stats.outside.length}`,
  );
  return stats;
}

/** Every call answers from the inside repository (before and after a race). */
async function expectInsideAnswers(): Promise<void> {
  const registry = createRegistry(gitTools);
  for (const [name, args] of CALLS) {
    const r = await registry.call(name, args, world.ctx);
    expect(r.error).toBeUndefined();
    expect(JSON.stringify(r)).toContain('inside');
    expect(JSON.stringify(r)).not.toContain('OUTSIDE');
  }
  const show = await registry.call('git_show', { repository: 'd/repo' }, world.ctx);
  expect(show.result).toMatchObject({ commit: { sha: insideHead, subject: 'inside second' } });
}

describe('a directory above a repository swapped for an outward symlink while the git tools run', () => {
  for (const [inPlaceMs, swappedMs] of [
    [5, 2], // the review's rhythm
    [150, 2], // rare swaps: calls are answered, some while a swap happens
  ]) {
    it(`no git tool answers from outside or names where the link points (${inPlaceMs} ms in place, ${swappedMs} ms swapped)`, {
      timeout: 40_000,
    }, async () => {
      expect(world.ctx.paths.raceFree).toBe(process.platform === 'linux');
      if (!world.ctx.paths.raceFree) return; // docs/toolsets.md, Git safety: without /proc git is not pinned
      await expectInsideAnswers();
      const stats = await underSwaps(inPlaceMs, swappedMs);
      expect(stats.outside).toEqual([]);
      expect(stats.others).toEqual([]);
      expect(stats.swaps).toBeGreaterThan(0);
      expect(stats.calls).toBe(stats.rounds * CALLS.length);
      await expectInsideAnswers();
    });
  }
});
