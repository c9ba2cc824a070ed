import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../agent-server/app.ts';
import { createGatewayClient } from '../../agent-server/clients/gateway.ts';
import type { CompleteOptions, Model, ModelReply, ModelRequest } from '../../agent-server/clients/model.ts';
import type { TaskEvent } from '../../agent-server/contract.ts';
import { createTaskStore } from '../../agent-server/store/store.ts';
import { createAgent } from '../../agent-server/tasks/agent.ts';
import { openDatabase } from '../../lib/db/sqlite.ts';
import { answer } from '../helpers/scripted-model.ts';
import { readSse } from '../helpers/sse.ts';
import {
  fetchOf,
  log,
  makeStack,
  openSecurity,
  retain,
  SPLIT_TOOLSETS,
  type Stack,
} from '../helpers/stack.ts';

// The model's text as it streams: `model_delta` events to a task's followers, gathered rather than one per
// token, with no SSE id, never stored and never replayed; a retried attempt's text is marked as such.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

type Step = (request: ModelRequest, options: CompleteOptions) => Promise<ModelReply>;

/** A model playing `steps`, each of which may stream its text through `onDelta`. */
function model(steps: Step[]): Model {
  let n = 0;
  return {
    complete: (request, options = {}) => {
      const step = steps[n++];
      if (!step) throw new Error(`no step ${n}`);
      return step(request, options);
    },
  };
}

/** A promise to wait on and the function that settles it. */
function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { opened, open };
}

async function agentOver(s: Stack, m: Model) {
  const store = createTaskStore(openDatabase(path.join(s.dataDir, `agent-${Math.random()}.db`)));
  retain(store);
  const agent = createAgent({
    store,
    gateway: createGatewayClient({ baseUrl: 'http://gateway', fetch: fetchOf(s.gatewayApp) }),
    model: m,
    modelName: 'test-model',
    defaultMaxSteps: 20,
    log,
    prime: false,
  });
  const app = createAgentApp({ agent, store, log, security: openSecurity });
  const submit = async (goal: string) =>
    (
      (await (
        await app.request('/agent/execute_task', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ goal, wait: false }),
        })
      ).json()) as { task_id: string }
    ).task_id;
  const events = (id: string, headers: Record<string, string> = {}) =>
    app.request(`/agent/tasks/${id}/events`, { headers });
  const stored = async (id: string) =>
    ((await (await app.request(`/agent/tasks/${id}`)).json()) as { events: TaskEvent[] }).events;
  return { submit, events, stored };
}

describe('the model’s streamed text', () => {
  it('reaches a follower as it comes, gathered, with no id; it is neither stored nor replayed', async () => {
    const go = gate();
    const more = gate();
    const words = Array.from({ length: 20 }, (_, i) => `w${i} `);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = await agentOver(
      stack,
      model([
        async (_request, { onDelta }) => {
          await go.opened;
          for (const w of words) onDelta?.(w);
          await more.opened;
          onDelta?.('end.');
          return answer(`${words.join('')}end.`);
        },
      ]),
    );
    const id = await a.submit('say something');
    const follower = readSse(await a.events(id));
    await follower.until('model_request');
    go.open();
    const first = await follower.until('model_delta');
    more.open();
    await follower.until('result');
    const names = follower.seen.map((m) => m.event);
    expect(names).toEqual([
      'task_started',
      'model_request',
      'model_delta',
      'model_delta',
      'model_call',
      'task_finished',
      'result',
    ]);
    // Twenty pieces told at once went out as one event; none carries an id.
    const deltas = follower.seen.filter((m) => m.event === 'model_delta');
    expect(deltas.map((m) => m.id)).toEqual([undefined, undefined]);
    expect(deltas.map((m) => JSON.parse(m.data))).toEqual([
      { type: 'model_delta', at: expect.any(String), data: { step: 1, attempt: 1, text: words.join('') } },
      { type: 'model_delta', at: expect.any(String), data: { step: 1, attempt: 1, text: 'end.' } },
    ]);
    expect(first?.data).toBe(deltas[0].data);
    const events = await a.stored(id);
    expect(events.map((e) => e.type)).not.toContain('model_delta');
    expect(events.find((e) => e.type === 'model_call')?.data.content).toBe(`${words.join('')}end.`);
    const resumed = readSse(await a.events(id, { 'last-event-id': '1' }));
    await resumed.until('result');
    expect(resumed.seen.map((m) => m.event)).toEqual([
      'model_request',
      'model_call',
      'task_finished',
      'result',
    ]);
  });

  it('a follower who joins while the model writes gets the text so far first, then what follows', async () => {
    const more = gate();
    const sent = gate();
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = await agentOver(
      stack,
      model([
        async (_request, { onDelta }) => {
          onDelta?.('The first ');
          onDelta?.('half, ');
          // Gathered and sent (no one follows yet) before the follower comes.
          await new Promise((r) => setTimeout(r, 120));
          sent.open();
          await more.opened;
          onDelta?.('then the rest.');
          return answer('The first half, then the rest.');
        },
      ]),
    );
    const id = await a.submit('say something');
    await sent.opened;
    const late = readSse(await a.events(id));
    const first = await late.until('model_delta');
    expect(JSON.parse(first?.data ?? '{}').data).toEqual({ step: 1, attempt: 1, text: 'The first half, ' });
    more.open();
    await late.until('result');
    const texts = late.seen
      .filter((m) => m.event === 'model_delta')
      .map((m) => JSON.parse(m.data).data.text as string);
    expect(texts.join('')).toBe('The first half, then the rest.');
  });

  it('marks the text of an attempt that is retried: the next attempt’s text carries its number', async () => {
    const sent = gate();
    const heard = gate();
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = await agentOver(
      stack,
      model([
        async (_request, { onDelta, onRetry }) => {
          await sent.opened;
          onDelta?.('a draft');
          // Held until the follower has it, then the attempt fails and is tried again.
          await heard.opened;
          onRetry?.({ attempt: 1, status: null, reason: 'the stream was cut off', delay_ms: 0 });
          onDelta?.('unsent');
          onRetry?.({ attempt: 2, status: null, reason: 'the stream was cut off', delay_ms: 0 });
          onDelta?.('The answer.');
          return { ...answer('The answer.'), attempts: 3 };
        },
      ]),
    );
    const id = await a.submit('answer');
    const follower = readSse(await a.events(id));
    await follower.until('model_request');
    sent.open();
    await follower.until('model_delta');
    heard.open();
    await follower.until('result');
    const told = follower.seen
      .filter((m) => m.event === 'model_delta' || m.event === 'model_retry')
      .map((m) => [m.event, JSON.parse(m.data).data]);
    // The second attempt's text was never sent: its retry came within the 50 ms it gathers for.
    expect(told).toEqual([
      ['model_delta', { step: 1, attempt: 1, text: 'a draft' }],
      ['model_retry', expect.objectContaining({ step: 1, attempt: 1 })],
      ['model_retry', expect.objectContaining({ step: 1, attempt: 2 })],
      ['model_delta', { step: 1, attempt: 3, text: 'The answer.' }],
    ]);
  });
});
