import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChaosStack, outageRun, startChaosStack } from '../helpers/chaos-stack.ts';

// Issue 32, item 8: PostgreSQL stopped for 10 s while 80 tasks run on the agent API, two workers and two
// gateway replicas. No process exits; /health says degraded and why; what needs the database answers 503 with
// Retry-After; once it is back every task ends as it would have, its events complete.

let stack: ChaosStack;

beforeAll(async () => {
  stack = await startChaosStack();
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

describe('a database blip is not a crash', () => {
  it('PostgreSQL stopped for 10 s under load: every process rides it out, every task ends ok', async () => {
    const report = await outageRun(stack, 80, 10_000);
    const logs = Object.fromEntries(stack.services.map((s) => [s.name, s.log().slice(-3000)]));
    if (process.env.CHAOS_LOGS) for (const s of stack.services) writeFileSync(`${process.env.CHAOS_LOGS}/${s.name}.log`, s.log());
    expect(report.dead, JSON.stringify(logs)).toEqual([]);
    console.log(JSON.stringify({ during: report.healthDuring, read: report.readDuring, submit: report.submitDuring }, null, 1));
    const statuses = report.tasks.map((t) => t.status);
    console.log(JSON.stringify(statuses.reduce((a: any, s: string) => ({ ...a, [s]: (a[s] ?? 0) + 1 }), {})));
    expect(statuses.every((s) => s === 'completed'), JSON.stringify(report.tasks.filter((t) => t.status !== 'completed').map((t) => [t.status, t.error]))).toBe(true);
  }, 400_000);
});
