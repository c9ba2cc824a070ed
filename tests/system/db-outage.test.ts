import { afterAll, beforeAll, describe, it } from 'vitest';
import { type ChaosStack, expectRodeItOut, outageRun, startChaosStack } from '../helpers/chaos-stack.ts';

// Issue 32, item 8: PostgreSQL stopped for 10 s while 80 tasks run on the agent API, two workers and two
// gateway replicas, each its own process. No process exits; /health says degraded and why; what needs the
// database answers 503 with Retry-After; once it is back every task ends as it would have, its events
// complete. The leases last 5 s here, so they lapse during the outage: their workers take them back. The 60 s
// outage, with the default lease, is db-outage.stress.test.ts.

let stack: ChaosStack;

beforeAll(async () => {
  stack = await startChaosStack({ TASK_LEASE_S: '5' });
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

describe('a database blip is not a crash', () => {
  it('PostgreSQL stopped for 10 s under load: every process rides it out, every task ends ok', async () => {
    expectRodeItOut(await outageRun(stack, 80, 10_000), stack);
  }, 400_000);
});
