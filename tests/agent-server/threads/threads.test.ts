import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { afterEach, describe, expect, it } from 'vitest';
import type {
  CompleteOptions,
  Model,
  ModelReply,
  ModelRequest,
} from '../../../agent-server/clients/model.ts';
import { ModelError } from '../../../agent-server/errors.ts';
import { SUMMARY_HEAD } from '../../../agent-server/loop/context.ts';
import { answer, call, calls, ScriptedModel, type Step } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** Two file tools as one toolset (small definitions: the budgets below count them). */
const FILES = {
  'files.yaml': 'id: files\ndescription: Read and write files.\ntools: [read_text_file, write_file]\n',
};

const activate = (id = 'files') => call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: [id] });

async function run(s: Stack, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return s.post(s.agentApp, '/agent/execute_task', body, headers);
}

/** True when `prefix` is the start of `messages`, message for message. */
function startsWith(messages: ChatCompletionMessageParam[], prefix: ChatCompletionMessageParam[]) {
  return JSON.stringify(messages.slice(0, prefix.length)) === JSON.stringify(prefix);
}

/** A scripted model whose steps may wait: a waiting step ends when the task's call is aborted (a cancel). */
class WaitingModel implements Model {
  readonly scripted: ScriptedModel;
  constructor(steps: Step[]) {
    this.scripted = new ScriptedModel(steps);
  }
  complete(request: ModelRequest, options: CompleteOptions = {}): Promise<ModelReply> {
    return new Promise((resolve, reject) => {
      options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true });
      this.scripted.complete(request).then(resolve, reject);
    });
  }
}

describe('threads', () => {
  it('a task without thread_id starts a thread; the next task continues it with its turns and its toolsets, appending', async () => {
    const model = new ScriptedModel([
      calls(activate()),
      calls(call('write_file', { path: 'march.txt', content: 'sales: 12' })),
      answer('Wrote march.txt.'),
      calls(call('read_text_file', { path: 'march.txt' })),
      answer('It says sales: 12.'),
    ]);
    stack = await makeStack({ model, toolsets: FILES });
    const first = await run(stack, { goal: 'write the March figures' });
    expect(first.body).toMatchObject({ status: 'completed', thread_id: expect.stringMatching(/^thr_/) });
    const second = await run(stack, { goal: 'now read them back', thread_id: first.body.thread_id });
    expect(second.body).toMatchObject({
      status: 'completed',
      final_answer: 'It says sales: 12.',
      thread_id: first.body.thread_id,
      session_id: first.body.session_id,
    });
    // The thread's session kept the toolset: the second task's first request offers its tools at once.
    expect(model.toolNames()[3]).toEqual(['manage_toolsets', 'read_text_file', 'write_file']);
    // Appended, never rewritten: the second task's first request extends the first task's last one with its
    // answer and the new goal.
    const last = model.requests[2].messages;
    const next = model.requests[3].messages;
    expect(startsWith(next, last)).toBe(true);
    expect(next.slice(last.length)).toEqual([
      { role: 'assistant', content: 'Wrote march.txt.' },
      { role: 'user', content: 'now read them back' },
    ]);
    const thread = await stack.get(stack.agentApp, `/agent/threads/${first.body.thread_id}`);
    expect(thread.status).toBe(200);
    expect(thread.body).toMatchObject({
      thread_id: first.body.thread_id,
      title: 'write the March figures',
      turns: [
        {
          task_id: first.body.task_id,
          goal: 'write the March figures',
          status: 'completed',
          final_answer: 'Wrote march.txt.',
        },
        { task_id: second.body.task_id, goal: 'now read them back', status: 'completed' },
      ],
    });
    const list = await stack.get(stack.agentApp, '/agent/threads');
    expect(list.body.threads.map((t: { thread_id: string }) => t.thread_id)).toEqual([first.body.thread_id]);
    const task = await stack.get(stack.agentApp, `/agent/tasks/${second.body.task_id}`);
    expect(task.body.thread_id).toBe(first.body.thread_id);
    expect(task.body.events[0].data.thread_id).toBe(first.body.thread_id);
  });

  it('POST /agent/threads makes an empty thread; pages of GET /agent/threads go on with `after`', async () => {
    const model = new ScriptedModel([answer('one'), answer('two')]);
    stack = await makeStack({ model, toolsets: FILES });
    const made = await stack.post(stack.agentApp, '/agent/threads', { title: 'Quarterly report' });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ thread_id: expect.stringMatching(/^thr_/), title: 'Quarterly report' });
    const first = await run(stack, { goal: 'start', thread_id: made.body.thread_id });
    expect(first.body).toMatchObject({ status: 'completed', session_id: made.body.session_id });
    const other = await run(stack, { goal: 'another' });
    const page1 = await stack.get(stack.agentApp, '/agent/threads?limit=1');
    expect(page1.body.threads.map((t: { thread_id: string }) => t.thread_id)).toEqual([other.body.thread_id]);
    expect(page1.body.next).toBe(other.body.thread_id);
    const page2 = await stack.get(stack.agentApp, `/agent/threads?limit=1&after=${page1.body.next}`);
    expect(page2.body.threads.map((t: { thread_id: string }) => t.thread_id)).toEqual([made.body.thread_id]);
    expect(page2.body.next).toBeNull();
  });

  it('bad input: an unknown thread is 404, a malformed id 400, another session than the thread’s 400', async () => {
    stack = await makeStack({ model: new ScriptedModel([answer('ok')]), toolsets: FILES });
    const unknown = `thr_${crypto.randomUUID()}`;
    const missing = await run(stack, { goal: 'go on', thread_id: unknown });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toContain(`No thread ${unknown}`);
    expect((await stack.get(stack.agentApp, `/agent/threads/${unknown}`)).status).toBe(404);
    const bad = await run(stack, { goal: 'go on', thread_id: 'x'.repeat(5000) });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('thread_id');
    const busy = await run(stack, { goal: 'go on', if_busy: 'sometimes' });
    expect(busy.status).toBe(400);
    expect(busy.body.error).toMatch(/enqueue.*reject.*interrupt/);
    const made = await stack.post(stack.agentApp, '/agent/threads', {});
    const other = await run(stack, {
      goal: 'go on',
      thread_id: made.body.thread_id,
      session_id: 'ses_other',
    });
    expect(other.status).toBe(400);
    expect(other.body.error).toContain(`is not the session of thread ${made.body.thread_id}`);
  });

  it('another credential’s thread is not there: 404 to read, list, continue or delete', async () => {
    const model = new ScriptedModel([answer('mine')]);
    stack = await makeStack({
      model,
      toolsets: FILES,
      tokens: { user: 'user-token-1', viewer: 'viewer-token-1' },
    });
    const user = { authorization: 'Bearer user-token-1' };
    const viewer = { authorization: 'Bearer viewer-token-1' };
    const mine = await run(stack, { goal: 'private work' }, user);
    expect(mine.status).toBe(200);
    const id = mine.body.thread_id;
    expect((await stack.get(stack.agentApp, `/agent/threads/${id}`, user)).status).toBe(200);
    const read = await stack.get(stack.agentApp, `/agent/threads/${id}`, viewer);
    expect(read.status).toBe(404);
    expect(read.body.error).toContain(`No thread ${id}`);
    const list = await stack.get(stack.agentApp, '/agent/threads', viewer);
    expect(list.body.threads).toEqual([]);
    const page = await stack.get(stack.agentApp, `/agent/threads?after=${id}`, viewer);
    expect(page.status).toBe(404);
  });

  it('if_busy: reject answers 409 naming the running task; enqueue waits and goes on from its answer', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const model = new WaitingModel([
      async () => {
        await held;
        return answer('first done');
      },
      answer('second done'),
    ]);
    stack = await makeStack({ model, toolsets: FILES });
    const first = await run(stack, { goal: 'slow one', wait: false });
    const thread = first.body.thread_id;
    const rejected = await run(stack, { goal: 'too soon', thread_id: thread, if_busy: 'reject' });
    expect(rejected.status).toBe(409);
    expect(rejected.body.error).toContain(first.body.task_id);
    const queued = await run(stack, { goal: 'after it', thread_id: thread, wait: false });
    expect(queued.body.status).toBe('queued');
    // It waits for the first though a slot is free.
    expect((await stack.get(stack.agentApp, `/agent/tasks/${queued.body.task_id}`)).body.status).toBe(
      'queued',
    );
    release();
    await expect
      .poll(
        async () => (await stack?.get(stack.agentApp, `/agent/tasks/${queued.body.task_id}`))?.body.status,
      )
      .toBe('completed');
    const second = model.scripted.requests[1].messages;
    expect(second.slice(-2)).toEqual([
      { role: 'assistant', content: 'first done' },
      { role: 'user', content: 'after it' },
    ]);
  });

  it('if_busy interrupt cancels the running turn and goes on from what it had done', async () => {
    const model = new WaitingModel([
      calls(activate()),
      calls(call('write_file', { path: 'draft.txt', content: 'v1' })),
      () => new Promise<ModelReply>(() => {}),
      answer('stopped the draft'),
    ]);
    stack = await makeStack({ model, toolsets: FILES });
    const first = await run(stack, { goal: 'draft it', wait: false });
    await expect.poll(() => model.scripted.requests.length).toBe(3);
    const next = await run(stack, {
      goal: 'stop, that is enough',
      thread_id: first.body.thread_id,
      if_busy: 'interrupt',
    });
    expect(next.body).toMatchObject({ status: 'completed', final_answer: 'stopped the draft' });
    expect((await stack.get(stack.agentApp, `/agent/tasks/${first.body.task_id}`)).body.status).toBe(
      'cancelled',
    );
    const seen = model.scripted.requests[3].messages;
    const text = JSON.stringify(seen);
    expect(text).toContain('draft.txt');
    expect(seen.at(-1)).toEqual({ role: 'user', content: 'stop, that is enough' });
  });

  it('DELETE removes a thread with its tasks; not while one of them has not ended', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const model = new WaitingModel([
      answer('kept'),
      async () => {
        await held;
        return answer('late');
      },
    ]);
    stack = await makeStack({ model, toolsets: FILES });
    const first = await run(stack, { goal: 'one' });
    const running = await run(stack, { goal: 'two', thread_id: first.body.thread_id, wait: false });
    const refused = await stack.delete(stack.agentApp, `/agent/threads/${first.body.thread_id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toContain(running.body.task_id);
    release();
    await expect
      .poll(
        async () => (await stack?.get(stack.agentApp, `/agent/tasks/${running.body.task_id}`))?.body.status,
      )
      .toBe('completed');
    const gone = await stack.delete(stack.agentApp, `/agent/threads/${first.body.thread_id}`);
    expect(gone.body).toEqual({ thread_id: first.body.thread_id, deleted_tasks: 2 });
    expect((await stack.get(stack.agentApp, `/agent/threads/${first.body.thread_id}`)).status).toBe(404);
    expect((await stack.get(stack.agentApp, `/agent/tasks/${first.body.task_id}`)).status).toBe(404);
  });
});

describe('threads under pressure', () => {
  it('two goals sent at once to an idle thread run one after the other, the second seeing the first', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const model = new WaitingModel([
      answer('first turn'),
      async () => {
        await held;
        return answer('one of the two');
      },
      answer('the other'),
    ]);
    stack = await makeStack({ model, toolsets: FILES });
    const first = await run(stack, { goal: 'start' });
    const thread = first.body.thread_id;
    const [a, b] = await Promise.all([
      run(stack, { goal: 'goal A', thread_id: thread, wait: false }),
      run(stack, { goal: 'goal B', thread_id: thread, wait: false }),
    ]);
    expect([a.body.status, b.body.status].sort()).toEqual(['queued', 'running']);
    await expect.poll(() => model.scripted.requests.length).toBe(2);
    release();
    await expect.poll(() => model.scripted.requests.length).toBe(3);
    // The later turn's request holds the earlier turn's goal and answer: they did not run side by side.
    const [earlier, later] = [model.scripted.requests[1], model.scripted.requests[2]];
    const goalOf = (r: ModelRequest) => String(r.messages.at(-1)?.content);
    expect(JSON.stringify(later.messages)).toContain(goalOf(earlier));
    expect(JSON.stringify(later.messages)).toContain('one of the two');
  });

  it('a turn cancelled between the calls of one reply keeps the calls that ran; the next turn sees them as run', async () => {
    let callsSeen = 0;
    const model = new WaitingModel([
      calls(activate()),
      calls(
        call('write_file', { path: 'a.txt', content: 'A' }, 'first'),
        call('write_file', { path: 'b.txt', content: 'B' }, 'second'),
      ),
      answer('went on'),
    ]);
    stack = await makeStack({
      model,
      toolsets: FILES,
      // The reply's second call never comes back: the turn is cancelled while it is out.
      interceptGateway: async (request, next) => {
        if (request.url.includes('/call') && (await request.clone().text()).includes('b.txt')) {
          callsSeen++;
          // Out until the task's call is abandoned (its signal aborts the request, as a real fetch's would).
          return new Promise<Response>((_, reject) =>
            request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true }),
          );
        }
        return next();
      },
    });
    const first = await run(stack, { goal: 'write both', wait: false });
    await expect.poll(() => callsSeen).toBe(1);
    const next = await run(stack, {
      goal: 'what happened?',
      thread_id: first.body.thread_id,
      if_busy: 'interrupt',
    });
    expect(next.body.status).toBe('completed');
    const seen = model.scripted.requests[2].messages;
    const results = seen.filter((m) => m.role === 'tool') as { tool_call_id: string; content: string }[];
    expect(results.find((m) => m.tool_call_id === 'first')?.content).not.toContain('Not run');
    expect(results.find((m) => m.tool_call_id === 'second')?.content).toContain(
      'Not run: the task ended (cancelled)',
    );
  });

  it('another credential’s thread’s tasks are not there either: read, events, cancel, listed', async () => {
    const model = new ScriptedModel([answer('mine')]);
    stack = await makeStack({
      model,
      toolsets: FILES,
      tokens: { user: 'user-token-2', viewer: 'viewer-token-2' },
    });
    const user = { authorization: 'Bearer user-token-2' };
    const viewer = { authorization: 'Bearer viewer-token-2' };
    const mine = await run(stack, { goal: 'private' }, user);
    const id = mine.body.task_id;
    expect((await stack.get(stack.agentApp, `/agent/tasks/${id}`, user)).status).toBe(200);
    const read = await stack.get(stack.agentApp, `/agent/tasks/${id}`, viewer);
    expect(read.status).toBe(404);
    expect(read.body.error).toContain(`No task ${id}`);
    const events = await stack.agentApp.request(`/agent/tasks/${id}/events`, { headers: viewer });
    expect(events.status).toBe(404);
    expect((await stack.get(stack.agentApp, '/agent/tasks', viewer)).body.tasks).toEqual([]);
    expect(
      (await stack.get(stack.agentApp, '/agent/tasks', user)).body.tasks.map(
        (t: { task_id: string }) => t.task_id,
      ),
    ).toEqual([id]);
  });
});

describe('compaction', () => {
  it('near the budget a large old result is stubbed, read back by its handle, and the prefix holds after', async () => {
    const big = Array.from({ length: 5000 }, (_, i) => `row${i}`).join(' ');
    const model = new ScriptedModel([
      calls(activate()),
      calls(call('read_text_file', { path: 'big.txt' })),
      answer('read it'),
      // The second turn: the result is a stub now; the model reads it back.
      (request) => {
        const texts = request.messages.map((m) => String(m.content ?? '')).join('\n');
        const stub = /"handle": "(r\d+)"/.exec(texts)?.[1];
        return calls(call('read_stored_result', { handle: stub ?? 'none' }));
      },
      answer('row0 comes first'),
      answer('third turn'),
    ]);
    stack = await makeStack({ model, toolsets: FILES, contextTokens: 8000 });
    await writeFile(path.join(stack.root, 'big.txt'), big);
    const first = await run(stack, { goal: 'read big.txt' });
    expect(first.body.status).toBe('completed');
    const second = await run(stack, { goal: 'what comes first?', thread_id: first.body.thread_id });
    expect(second.body).toMatchObject({ status: 'completed', final_answer: 'row0 comes first' });
    const turn2 = model.requests[3];
    const stubbed = turn2.messages.find((m) => m.role === 'tool' && String(m.content).includes('moved out'));
    expect(stubbed?.content).toMatch(/read_stored_result \{"handle": "r\d+"\}/);
    expect(JSON.stringify(turn2.messages)).not.toContain('row4999');
    expect(model.toolNames()[3]).toContain('read_stored_result');
    // The read gives the result back, from its start.
    const read = model.requests[4].messages.at(-1) as { content: string };
    const body = JSON.parse(read.content);
    expect(body.content).toContain('row0 row1 row2');
    expect(body.offset).toBe(0);
    expect(body.total_chars).toBeGreaterThan(8000);
    const events = (await stack.get(stack.agentApp, `/agent/tasks/${second.body.task_id}`)).body.events;
    const compacted = events.find((e: { type: string }) => e.type === 'context_compacted');
    expect(compacted.data).toMatchObject({ stubbed: 1, summarised_messages: 0 });
    expect(compacted.data.tokens_after).toBeLessThan(compacted.data.tokens_before);
    // Nothing lost: the thread still holds the whole result.
    const transcripts = await stack.taskStore.threadTranscripts(first.body.thread_id);
    expect(JSON.stringify(transcripts)).toContain('row4999');
    // After the compaction the next turn extends the last request again.
    await run(stack, { goal: 'thanks', thread_id: first.body.thread_id });
    expect(startsWith(model.requests[5].messages, model.requests[4].messages)).toBe(true);
    const thread = await stack.get(stack.agentApp, `/agent/threads/${first.body.thread_id}`);
    expect(thread.body.compaction).toEqual({ summarised_messages: 0, stubbed_results: 1 });
  });

  it('when stubs are not enough, the oldest turns are summarised by one model call; the thread never fails for length', async () => {
    const long = (word: string) => Array.from({ length: 1400 }, () => word).join(' ');
    const summaries: ModelRequest[] = [];
    const model = new ScriptedModel([
      answer('noted alpha'),
      answer('noted beta'),
      (request) => {
        summaries.push(request);
        return answer('The user gave two long lists (alpha, beta); both were noted.');
      },
      answer('noted gamma'),
      answer('still here'),
    ]);
    // The lists' sizes are set against the catalog's lines without tool names (named only with AUTO_ACTIVATE).
    stack = await makeStack({ model, toolsets: FILES, contextTokens: 4000, autoActivate: false });
    const first = await run(stack, { goal: long('alpha') });
    const thread = first.body.thread_id;
    await run(stack, { goal: long('beta'), thread_id: thread });
    const third = await run(stack, { goal: long('gamma'), thread_id: thread });
    expect(third.body).toMatchObject({ status: 'completed', final_answer: 'noted gamma' });
    // One call for the summary, with no tools, reading the turns it replaces.
    expect(summaries).toHaveLength(1);
    expect(summaries[0].tools).toEqual([]);
    expect(JSON.stringify(summaries[0].messages)).toContain('noted beta');
    const seen = model.requests[3].messages;
    expect(seen[0].role).toBe('system');
    // The summary stands as the assistant's own notes, not as a user's words (tool results wrote it).
    expect(seen[1]).toEqual({
      role: 'assistant',
      content: `${SUMMARY_HEAD}\nThe user gave two long lists (alpha, beta); both were noted.`,
    });
    expect(JSON.stringify(seen)).not.toContain('alpha alpha');
    const events = (await stack.get(stack.agentApp, `/agent/tasks/${third.body.task_id}`)).body.events;
    expect(
      events.find((e: { type: string }) => e.type === 'context_compacted').data.summarised_messages,
    ).toBe(4);
    // The turn after extends the compacted conversation.
    await run(stack, { goal: 'still there?', thread_id: thread });
    expect(startsWith(model.requests[4].messages, [...seen])).toBe(true);
    const detail = await stack.get(stack.agentApp, `/agent/threads/${thread}?turns=2`);
    expect(detail.body).toMatchObject({ turns_total: 4, compaction: { summarised_messages: 4 } });
    expect(detail.body.turns.map((t: { goal: string }) => t.goal)).toEqual([long('gamma'), 'still there?']);
  });

  it('a summary the model cannot write costs the summary, not the turn: the stubs stand and the turn goes on', async () => {
    const long = (word: string) => Array.from({ length: 1400 }, () => word).join(' ');
    const model = new ScriptedModel([
      answer('noted alpha'),
      answer('noted beta'),
      () => {
        throw new ModelError('the endpoint refused the summary (400)');
      },
      answer('noted gamma all the same'),
    ]);
    stack = await makeStack({ model, toolsets: FILES, contextTokens: 4000, autoActivate: false });
    const first = await run(stack, { goal: long('alpha') });
    await run(stack, { goal: long('beta'), thread_id: first.body.thread_id });
    const third = await run(stack, { goal: long('gamma'), thread_id: first.body.thread_id });
    expect(third.body).toMatchObject({ status: 'completed', final_answer: 'noted gamma all the same' });
    const events = (await stack.get(stack.agentApp, `/agent/tasks/${third.body.task_id}`)).body.events;
    const compacted = events.find((e: { type: string }) => e.type === 'context_compacted');
    expect(compacted.data.summary_failed).toContain('refused the summary');
    expect(compacted.data.summarised_messages).toBe(0);
  });
});
