import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { postgresDbTracked, sqliteDb } from '../lib/db/kysely.ts';
import { openPostgres } from '../lib/db/postgres.ts';
import { openDatabase } from '../lib/db/sqlite.ts';
import type { LimitSubject } from '../lib/identity/limits.ts';
import type { IdentityDatabase } from '../lib/identity/schema.ts';
import { IdentityStore } from '../lib/identity/store.ts';
import { freshDatabase, startTestPostgres } from '../tests/helpers/postgres.ts';
import { f2, ms } from './format.ts';
import { percentile } from './timing.ts';

// Figure 20, what people and limits cost a request: a user's key checked (one indexed read of the key with its
// user, one of their teams; the last use written at most once a minute) and a limit counted (one upsert per
// subject that has the limit: the user's alone, or the user's and their team's in one transaction), each the
// median of many calls in turns, on SQLite (identity.db) and on PostgreSQL (the test run's throwaway server).
// The baseline is listing the users (two reads of small tables) on the same handle.

export interface LimitsArm {
  database: 'SQLite' | 'PostgreSQL';
  /** Medians, in milliseconds. */
  selectOneMs: number;
  checkKeyMs: number;
  chargeOneMs: number;
  chargeTwoMs: number;
  /** Of `attempts` charges racing from `racers` stores on one database against a limit of `limit`: how many passed. */
  race: { racers: number; attempts: number; limit: number; passed: number };
}

export interface LimitsRun {
  arms: LimitsArm[];
  rounds: number;
  skipped?: string;
}

async function arm(
  database: LimitsArm['database'],
  open: () => IdentityStore,
  rounds: number,
): Promise<LimitsArm> {
  const store = open();
  const others = [open(), open(), open()];
  try {
    await store.addTeam({ name: 'bench', limits: { tool_calls_per_minute: 1_000_000_000 } });
    // tasks_per_hour is the user's alone; tool_calls_per_minute the user's and the team's.
    const limits = { tasks_per_hour: 1_000_000_000, tool_calls_per_minute: 1_000_000_000 };
    const user = await store.addUser({ name: 'ben', teams: ['bench'], limits });
    const key = (await store.createKey({ user: user.name, role: 'runner' })).key;
    const check = await store.checkKey(key);
    if (!check || !('holder' in check)) throw new Error('the bench key was refused');
    const subjects = check.holder.subjects;
    const times = { select: [] as number[], check: [] as number[], one: [] as number[], two: [] as number[] };
    const timed = async (into: number[], work: () => Promise<unknown>) => {
      const started = performance.now();
      await work();
      into.push(performance.now() - started);
    };
    for (let i = 0; i < rounds; i++) {
      await timed(times.select, () => store.users());
      await timed(times.check, () => store.checkKey(key));
      await timed(times.one, () => store.charge(subjects, 'tasks_per_hour'));
      await timed(times.two, () => store.charge(subjects, 'tool_calls_per_minute'));
    }
    const race = await raceTo(store, others, subjects);
    return {
      database,
      selectOneMs: percentile(times.select, 0.5),
      checkKeyMs: percentile(times.check, 0.5),
      chargeOneMs: percentile(times.one, 0.5),
      chargeTwoMs: percentile(times.two, 0.5),
      race,
    };
  } finally {
    for (const s of [store, ...others]) await s.close();
  }
}

/** Four stores (four replicas) charging at once against a fresh limit of 50: exactly 50 may pass. */
async function raceTo(store: IdentityStore, others: IdentityStore[], base: LimitSubject[]) {
  const limit = 50;
  const subjects = [{ ...base[0], key: `${base[0].key}:race`, limits: { tasks_per_hour: limit } }];
  const racers = [store, ...others];
  const attempts = 200;
  const outcomes = await Promise.all(
    Array.from({ length: attempts }, (_, i) =>
      racers[i % racers.length].charge(subjects, 'tasks_per_hour').then(
        () => true,
        () => false,
      ),
    ),
  );
  return { racers: racers.length, attempts, limit, passed: outcomes.filter(Boolean).length };
}

export async function limitsRun(rounds = 500): Promise<LimitsRun> {
  const arms: LimitsArm[] = [];
  const dir = await mkdtemp(path.join(tmpdir(), 'bench-limits-'));
  try {
    const file = path.join(dir, 'identity.db');
    arms.push(
      await arm('SQLite', () => new IdentityStore(sqliteDb<IdentityDatabase>(openDatabase(file))), rounds),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  let skipped: string | undefined;
  try {
    const server = await startTestPostgres();
    process.env.TOOLSHIFT_TEST_POSTGRES_URL = server.url;
    try {
      const url = await freshDatabase('limits');
      const open = () =>
        new IdentityStore(postgresDbTracked<IdentityDatabase>(openPostgres(url, 'bench', { max: 2 })));
      arms.push(await arm('PostgreSQL', open, rounds));
    } finally {
      await server.stop();
    }
  } catch (err) {
    skipped = (err as Error).message;
  }
  return { arms, rounds, ...(skipped ? { skipped } : {}) };
}

/** Figure 20's section of BENCHMARKS.md. */
export function limitsSection(r: LimitsRun): string[] {
  const rows = r.arms.map(
    (a) =>
      `| ${a.database} | ${ms(a.selectOneMs)} | ${ms(a.checkKeyMs)} | ${ms(a.chargeOneMs)} | ${ms(a.chargeTwoMs)} | ` +
      `${a.race.passed} of ${a.race.attempts} (limit ${a.race.limit}, ${a.race.racers} stores) |`,
  );
  return [
    '## 20. Users, keys and limits',
    '',
    `What a user's key and a limit cost a request, medians of ${r.rounds} calls each in turns (bench/limits.ts): ` +
      'listing the users (the baseline: two reads of small tables), checking a key (its row with its user, their ' +
      'teams; its last use written at most once a minute), and counting a limit of the user alone (one upsert) or ' +
      'of the user and their team (two, in one transaction). Then 200 charges at once from four stores on one ' +
      'database (four replicas) against a limit of 50.',
    '',
    '| Database | Users listed | Key checked | Limit counted (user) | Limit counted (user and team) | Racing charges passed |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    ...r.arms.map(
      (a) =>
        `${a.database}: a key and one limit cost ${ms(a.checkKeyMs + a.chargeOneMs)} a request ` +
        `(${f2((a.checkKeyMs + a.chargeOneMs) / a.selectOneMs)}× the baseline read).`,
    ),
    ...(r.skipped ? [`PostgreSQL not measured: ${r.skipped}`] : []),
    '',
  ];
}
