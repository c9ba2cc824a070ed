import { currentActor, withActor } from '../mcp-gateway/audit-context.ts';
import { discoveryCatalog, loadNeeds, measureRecall, type Need } from '../tests/helpers/discovery.ts';
import type { SplitRecall } from './discovery.ts';

// Figure 5's learning from use (docs/upstream-servers.md, "Learned keywords"): simulated deployments' usage teaches the
// ranking, and the held-out needs measure it. Each `tune` need is a task's LIST query, asked by a few simulated
// users over 60 days, each followed by the right toolset's activation and a call of one of its tools (one in ten
// of those calls fails and teaches nothing), written as real audit rows through the gateway and its store in
// process; the learner passes once a simulated day. Then recall@1/@3 of the `held_out` needs — never taught —
// with and without what was learned. Poisoning: a held-out need pointed at a wrong toolset by one task repeating
// it, then by many tasks.

const DAY = 86_400_000;
/** Simulated days of use, users, and tasks per tuning need (each by a user on a day drawn at random). */
const DAYS = 60;
const USERS = 5;
const TASKS_PER_NEED = 3;
/** The poisoning cases: tasks (a lone task repeats the query ten times) and the users they are spread over. */
const HOSTILE = [
  { tasks: 1, users: 1 },
  { tasks: 20, users: 1 },
  { tasks: 20, users: 5 },
];

/** A hostile query pointed at a wrong toolset: what the need ranked first, before and after. */
export interface Poisoning {
  tasks: number;
  users: number;
  need: string;
  want: string;
  wrong: string;
  /** The need's first hit after the poisoning. */
  first: string | undefined;
  /** Held-out recall after it. */
  heldOut: SplitRecall;
}

/** One catalog taught by the simulated usage: recall before and after, and the poisoning cases. */
export interface Taught {
  /** Learned terms that rank at the end, over all toolsets. */
  terms: number;
  before: { heldOut: SplitRecall; tune: SplitRecall };
  after: { heldOut: SplitRecall; tune: SplitRecall };
  poisoning: Poisoning[];
}

export interface LearnedRecall {
  days: number;
  tasks: number;
  /** The catalog as shipped: its keywords were chosen on the tuning needs, the very words the usage teaches. */
  shipped: Taught;
  /** The same toolsets without their keywords, as `toolsets import` writes a server's. */
  bare: Taught;
}

type Catalog = Awaited<ReturnType<typeof discoveryCatalog>>;

/** 0 ≤ x < 1, the same sequence each run. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface SimTask {
  id: string;
  user: string;
  day: number;
  query: string;
  toolset: string;
  ok: boolean;
}

/** One task as the model runs it: LIST with its words, ACTIVATE, then a call of the toolset's first tool. */
async function runTask(c: Catalog, t: SimTask, repeat = 1): Promise<void> {
  const session = `ses_${t.id}`;
  const tool = c.catalog.toolset(t.toolset)?.tools[0] ?? 'none';
  await withActor({ actor: `model in task ${t.id}`, task_id: t.id, for_user: t.user }, async () => {
    for (let i = 0; i < repeat; i++) {
      await c.gateway.manageToolsets(session, { action: 'LIST', query: t.query });
      await c.gateway.manageToolsets(session, { action: 'ACTIVATE', toolset_ids: [t.toolset] });
      c.store.audit({ session_id: session, kind: 'call', subject: tool, ok: t.ok }, currentActor());
    }
  });
}

/** Runs the tasks of each day, then the learner's passes at the end of that day. */
async function simulate(c: Catalog, tasks: readonly SimTask[], start: number, repeat = 1): Promise<void> {
  const toolsetOf = (tool: string) => c.catalog.tools.get(tool)?.toolset;
  const days = [...new Set(tasks.map((t) => t.day))].sort((a, b) => a - b);
  for (const day of days) {
    for (const t of tasks.filter((x) => x.day === day)) await runTask(c, t, repeat);
    await c.store.flush();
    const at = start + day * DAY + 120_000;
    while ((await c.store.learnFromAudit(at, toolsetOf)).rows > 0);
  }
}

async function recall(c: Catalog, needs: readonly Need[]): Promise<SplitRecall> {
  const { needs: n, recallAt1, recallAt3 } = await measureRecall(c.gateway, needs);
  return { needs: n, recallAt1, recallAt3 };
}

/** The simulated usage: each tuning need a task's query, a few times, by users and on days drawn at random. */
function usage(tune: readonly Need[]): SimTask[] {
  const rnd = random(39);
  return tune.flatMap((need, i) =>
    Array.from({ length: TASKS_PER_NEED }, (_, k) => ({
      id: `t${i}_${k}`,
      user: `user:u${Math.floor(rnd() * USERS)}`,
      day: Math.floor(rnd() * DAYS),
      query: need.need,
      toolset: need.toolset,
      ok: rnd() >= 0.1,
    })),
  );
}

/** Teaches the tuning needs over simulated days on the shipped catalog and on one without keywords. */
export async function learnedRecall(): Promise<LearnedRecall> {
  const tasks = usage(loadNeeds().filter((n) => n.split === 'tune'));
  return {
    days: DAYS,
    tasks: tasks.length,
    shipped: await taught(tasks, {}),
    bare: await taught(tasks, { keywords: false }),
  };
}

/** One catalog: the held-out needs before and after the usage taught it, then poisoned. */
async function taught(tasks: readonly SimTask[], opts: { keywords?: false }): Promise<Taught> {
  const needs = loadNeeds();
  const tune = needs.filter((n) => n.split === 'tune');
  const heldOut = needs.filter((n) => n.split === 'held_out');
  const c = await discoveryCatalog(opts);
  try {
    const both = async () => ({ heldOut: await recall(c, heldOut), tune: await recall(c, tune) });
    const before = await both();
    const start = Date.now();
    await simulate(c, tasks, start);
    const end = start + DAYS * DAY;
    const learned = await c.store.learnedKeywords(end);
    c.catalog.setLearned(learned);
    const after = await both();
    const terms = [...learned.values()].reduce((sum, t) => sum + t.length, 0);
    const poisoning = [];
    for (const h of HOSTILE) poisoning.push(await poison(c, heldOut, end, h));
    return { terms, before, after, poisoning };
  } finally {
    await c.close();
  }
}

/**
 * Hostile users point a held-out need at a wrong toolset: `tasks` tasks of `users` users (a lone task repeats
 * it ten times), each LISTing it, activating the wrong toolset and calling one of its tools.
 */
async function poison(
  c: Catalog,
  heldOut: readonly Need[],
  at: number,
  { tasks, users }: { tasks: number; users: number },
): Promise<Poisoning> {
  const target = heldOut[0];
  const wrong = 'sequential_thinking';
  const hostile = Array.from({ length: tasks }, (_, i) => ({
    id: `hostile${tasks}x${users}_${i}`,
    user: `user:mallory${i % users}`,
    day: 0,
    query: target.need,
    toolset: wrong,
    ok: true,
  }));
  await simulate(c, hostile, at, tasks === 1 ? 10 : 1);
  c.catalog.setLearned(await c.store.learnedKeywords(at));
  const first = (await c.gateway.listToolsets('discovery', target.need)).toolsets[0]?.id;
  return {
    tasks,
    users,
    need: target.need,
    want: target.toolset,
    wrong,
    first,
    heldOut: await recall(c, heldOut),
  };
}

/** Figure 5's paragraph on learning from use (a figure, no goal); none for a result from before it was measured. */
export function learnedSection(l: LearnedRecall | undefined): string[] {
  if (!l) return [];
  const pc = (x: number) => `${(x * 100).toFixed(1)}%`;
  const r = (x: SplitRecall) => `${pc(x.recallAt1)} / ${pc(x.recallAt3)}`;
  const row = (name: string, t: Taught) => [
    name,
    r(t.before.heldOut),
    r(t.after.heldOut),
    r(t.before.tune),
    r(t.after.tune),
    String(t.terms),
  ];
  const poisoned = l.shipped.poisoning.map((p, i) => {
    const bare = l.bare.poisoning[i];
    const who = p.tasks === 1 ? 'one task repeating it ten times' : `${p.tasks} tasks of ${p.users} user(s)`;
    return `- ${who}: the need ranks ${p.first} first (shipped) and ${bare.first} (no keywords); held-out recall@1 ${pc(p.heldOut.recallAt1)} and ${pc(bare.heldOut.recallAt1)}`;
  });
  return [
    '',
    `**Learned from use** (a figure, no goal): ${l.tasks} simulated tasks over ${l.days} days, each a tuning need asked ` +
      'as a LIST query by one of five users, then the right toolset activated and one of its tools called (one call in ten ' +
      'fails and teaches nothing), written as audit rows through the gateway in process; the learner passes once a day. ' +
      'Recall@1 / recall@3 of the held-out needs (never taught) and of the taught tuning needs, without and with the ' +
      'learned terms, on the catalog as shipped (its keywords were chosen on the tuning needs: the usage teaches words it ' +
      'already has) and on the same toolsets without keywords (as `toolsets import` writes a server):',
    '',
    '| catalog | held out, before | held out, after | tuning, before | tuning, after | terms learned |',
    '|---|---|---|---|---|---|',
    `| ${row('as shipped', l.shipped).join(' | ')} |`,
    `| ${row('no keywords', l.bare).join(' | ')} |`,
    '',
    `Poisoning: a held-out need ("${l.shipped.poisoning[0]?.need}", ${l.shipped.poisoning[0]?.want}) pointed at ` +
      `${l.shipped.poisoning[0]?.wrong} by hostile tasks that LIST it, activate that toolset and call it:`,
    ...poisoned,
  ];
}
