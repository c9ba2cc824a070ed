import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ModelReply, ModelRequest } from '../agent-server/clients/model.ts';
import { createTokenCounter } from '../lib/telemetry/tokens.ts';
import { answer, call, calls } from '../tests/helpers/scripted-model.ts';
import { makeStack } from '../tests/helpers/stack.ts';

// Figure 19: threads. A thread's conversation grows by appending, so consecutive requests share their prefix,
// across the turns of a thread as within a task (19a, a 10-turn thread that needs no compaction); near the
// model's context budget it is compacted, and a 30-turn thread then costs fewer input tokens per turn than the
// same thread sent whole (19b). The model is scripted: each turn reads a file of its own and answers.

export interface ThreadsRun {
  /** 19a: share of each request's bytes that prefix the next, at the 9 turn boundaries and over all pairs. */
  turnBoundaryMin: number;
  turnBoundaryMean: number;
  allPairsMin: number;
  turns: number;
  /** 19b: input tokens per turn of a 30-turn thread, compacted (budget) and sent whole. */
  longTurns: number;
  budget: number;
  compactedPerTurn: number;
  wholePerTurn: number;
  /** The largest request of each arm, in tokens (tools and messages). */
  compactedMax: number;
  wholeMax: number;
  compactions: number;
  summaries: number;
}

const FILES = { 'files.yaml': 'id: files\ndescription: Read files.\ntools: [read_text_file]\n' };

/** A model that reads the file its goal names and answers; a request without tools is a summary to write. */
function fileReader() {
  const requests: ModelRequest[] = [];
  let summaries = 0;
  return {
    requests,
    summaries: () => summaries,
    async complete(request: ModelRequest): Promise<ModelReply> {
      requests.push(structuredClone(request));
      if (request.tools.length === 0) {
        summaries++;
        return answer('Earlier turns read files 1 to N and reported their first lines; nothing is open.');
      }
      const last = request.messages.at(-1);
      if (last?.role === 'tool') {
        const text = String(last.content);
        if (text.includes('"active_toolsets"'))
          return calls(call('read_text_file', { path: fileOf(request) }));
        return answer(`The file starts with ${text.slice(0, 60)}.`);
      }
      const offered = request.tools.some(
        (t) => t.type === 'function' && t.function.name === 'read_text_file',
      );
      if (!offered) return calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['files'] }));
      return calls(call('read_text_file', { path: fileOf(request) }));
    },
  };
}

/** The file the turn's goal names. */
function fileOf(request: ModelRequest): string {
  const goal = [...request.messages]
    .reverse()
    .find((m) => m.role === 'user' && String(m.content).startsWith('Read'));
  return `file-${/file (\d+)/.exec(String(goal?.content))?.[1] ?? '1'}.txt`;
}

/** Runs a `turns`-turn thread under `budget`; the model's requests and the turn each began. */
async function thread(turns: number, budget: number, words: number) {
  const model = fileReader();
  const stack = await makeStack({ model, toolsets: FILES, contextTokens: budget });
  try {
    for (let i = 1; i <= turns; i++) {
      const text = Array.from({ length: words }, (_, w) => `f${i}w${w}`).join(' ');
      await writeFile(path.join(stack.root, `file-${i}.txt`), text);
    }
    const starts: number[] = [];
    let threadId: string | undefined;
    let compactions = 0;
    for (let i = 1; i <= turns; i++) {
      starts.push(model.requests.length);
      const res = await stack.post(stack.agentApp, '/agent/execute_task', {
        goal: `Read file ${i} and tell me how it starts`,
        ...(threadId ? { thread_id: threadId } : {}),
      });
      if (res.body.status !== 'completed') throw new Error(`turn ${i}: ${JSON.stringify(res.body)}`);
      threadId = res.body.thread_id;
      const events = (await stack.get(stack.agentApp, `/agent/tasks/${res.body.task_id}`)).body.events;
      compactions += events.filter((e: { type: string }) => e.type === 'context_compacted').length;
    }
    return { requests: model.requests, starts, compactions, summaries: model.summaries() };
  } finally {
    await stack.close();
  }
}

const serialise = (r: ModelRequest) =>
  [...r.tools.map((t) => JSON.stringify(t)), ...r.messages.map((m) => JSON.stringify(m))].join('\n');

function prefixShare(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i / a.length;
}

export async function threadsRun(): Promise<ThreadsRun> {
  const counter = createTokenCounter();
  const size = (r: ModelRequest) =>
    counter.tools(r.tools.flatMap((t) => (t.type === 'function' ? [t.function] : []))) +
    counter.messages(r.messages);
  // 19a: no compaction (a budget far above the thread).
  const short = await thread(10, 10_000_000, 300);
  const texts = short.requests.map(serialise);
  const shares = texts.slice(1).map((t, i) => prefixShare(texts[i], t));
  const boundaries = short.starts.slice(1).map((s) => shares[s - 1]);
  // 19b: the same 30 turns, compacted under a budget the whole thread passes by its tenth turn, and sent whole.
  const budget = 16_000;
  const compacted = await thread(30, budget, 500);
  const whole = await thread(30, 10_000_000, 500);
  const perTurn = (run: Awaited<ReturnType<typeof thread>>) =>
    run.requests.reduce((sum, r) => sum + size(r), 0) / run.starts.length;
  return {
    turns: 10,
    turnBoundaryMin: Math.min(...boundaries),
    turnBoundaryMean: boundaries.reduce((a, b) => a + b, 0) / boundaries.length,
    allPairsMin: Math.min(...shares),
    longTurns: 30,
    budget,
    compactedPerTurn: perTurn(compacted),
    wholePerTurn: perTurn(whole),
    compactedMax: Math.max(...compacted.requests.map(size)),
    wholeMax: Math.max(...whole.requests.map(size)),
    compactions: compacted.compactions,
    summaries: compacted.summaries,
  };
}
