import { describe, expect, it } from 'vitest';
import type { ConcurrencyRun } from '../../bench/concurrency.ts';
import { workersGoals } from '../../bench/workers-goals.ts';

// The PostgreSQL workers' goals (issue 34): CPU per turn against SQLite's single process, and a second worker's
// turns/s, judged only on a machine with the cores for it.

const run = (layout: ConcurrencyRun['layout'], cpuMsPerTurn: number, turnsPerS: number, workers?: number) =>
  ({ layout, workers, tasks: 1000, cpuMsPerTurn, turnsPerS }) as ConcurrencyRun;

describe('the PostgreSQL workers goals', () => {
  it('judges CPU per turn against SQLite, and two workers against one only with four cores or more', () => {
    const sqlite = run('npm-start', 4, 300);
    const variants = [run('postgres-workers', 5, 200, 1), run('postgres-workers', 5.5, 330, 2)];
    const small = workersGoals(sqlite, variants, 2);
    expect(small.map((g) => [g.goal, g.met])).toEqual([
      ['≤ 1.3', true],
      ['≥ 1.6 with ≥ 4 cores', null],
    ]);
    expect(small[0].figure).toContain('2 cores');
    expect(small[0].measured).toBe('1.25 (5.00 ms vs 4.00 ms; 2 workers 5.50 ms)');
    const big = workersGoals(sqlite, variants, 8);
    expect(big.map((g) => g.met)).toEqual([true, true]);
    expect(workersGoals(run('npm-start', 3, 300), variants.slice(0, 1), 8).map((g) => g.met)).toEqual([
      false,
    ]);
    expect(workersGoals(sqlite, [], 8)).toEqual([]);
  });
});
