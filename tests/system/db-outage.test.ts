import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChaosStack, expectRodeItOut, outageRun, startChaosStack } from '../helpers/chaos-stack.ts';

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
    if (process.env.CHAOS_LOGS) for (const s of stack.services) writeFileSync(`${process.env.CHAOS_LOGS}/${s.name}.log`, s.log());
    const failedCalls = report.tasks.flatMap((t) => t.events).filter((e: any) => e.type === 'tool_call' && !e.data.ok);
    console.log(`tool calls failed during the outage: ${failedCalls.length}`, failedCalls.slice(0, 2).map((e: any) => JSON.stringify(e.data).slice(0, 400)));
    expectRodeItOut(report, stack);
  }, 400_000);
});
