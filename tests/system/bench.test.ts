import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAIModel } from '../../agent-server/clients/model.ts';
import { armKey, armScripts } from '../../bench/arms.ts';
import { RECORDED_LABEL, recordedGithubTools, writeBenchCatalog } from '../../bench/catalog.ts';
import { codeGoals } from '../../bench/code-goals.ts';
import { scriptName } from '../../bench/code-script.ts';
import { dataTasks } from '../../bench/data-tasks.ts';
import { type ArmFigures, economics, PRICE } from '../../bench/economics.ts';
import { type BenchResults, goals } from '../../bench/goals.ts';
import { completion, goalMarker, type RecordedRequest, startMockModel } from '../../bench/mock-model.ts';
import { RECORDED_SERVER_NAME, startRecordedServer } from '../../bench/recorded-server.ts';
import { renderReport } from '../../bench/report.ts';
import { ARMS, benchTasks, directTask, primedTask, scriptFor } from '../../bench/tasks.ts';
import type { TokenRun } from '../../bench/token-run.ts';
import { createTokenCounter } from '../../lib/telemetry/tokens.ts';
import { makeStack, type Stack } from '../helpers/stack.ts';

// The benchmark's own parts: the recorded-catalog backend, the catalog it writes, the tasks in their three
// arms, the figures computed from recorded requests, and the report. Timings are never asserted here.

describe('the recorded-catalog MCP backend', () => {
  it('answers tools/list with the recorded definitions unchanged, says it is recorded, and runs nothing', async () => {
    const recorded = recordedGithubTools();
    const server = await startRecordedServer(recorded);
    const client = new Client({ name: 'bench-test', version: '1.0.0' });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
      expect(client.getServerVersion()?.name).toBe(RECORDED_SERVER_NAME);
      expect(client.getInstructions()).toMatch(/listing only: no tool here runs/);
      const { tools } = await client.listTools();
      expect(tools).toHaveLength(117);
      expect(tools.map((t) => t.name)).toEqual(recorded.map((t) => t.name));
      expect(tools.find((t) => t.name === 'create_issue')?.inputSchema).toEqual(
        recorded.find((t) => t.name === 'create_issue')?.inputSchema,
      );
      await expect(client.callTool({ name: 'create_issue', arguments: {} })).rejects.toThrow(/not found/i);
    } finally {
      await client.close();
      await server.close();
    }
  });
});

describe('the benchmark catalog', () => {
  let dir: string;
  let stack: Stack;
  let closeRecorded: () => Promise<void>;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'bench-catalog-'));
    const written = await writeBenchCatalog(path.join(dir, 'toolsets'));
    closeRecorded = written.close;
    const files = Object.fromEntries(
      readdirSync(path.join(dir, 'toolsets')).map((f) => [
        f,
        readFileSync(path.join(dir, 'toolsets', f), 'utf8'),
      ]),
    );
    stack = await makeStack({ toolsets: files });
    await stack.catalog.prepare(stack.catalog.toolsets.map((t) => t.id));
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await closeRecorded?.();
    await rm(dir, { recursive: true, force: true });
  });

  it('holds at least 8 toolsets and 150 tools of real definitions, the recorded ones labelled as recorded', async () => {
    const { body } = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets');
    const toolsets = body.toolsets as { id: string; description: string; tools: string[]; health?: string }[];
    expect(toolsets.length).toBeGreaterThanOrEqual(8);
    expect(toolsets.reduce((n, t) => n + t.tools.length, 0)).toBeGreaterThanOrEqual(150);
    const github = toolsets.filter((t) => t.id.startsWith('github_'));
    expect(github).toHaveLength(13);
    expect(github.reduce((n, t) => n + t.tools.length, 0)).toBe(117);
    for (const t of github) expect(t.description.endsWith(RECORDED_LABEL)).toBe(true);
    for (const t of toolsets.filter((x) => !x.id.startsWith('github_')))
      expect(t.description).not.toContain('Recorded');
    expect(toolsets.map((t) => t.id)).toEqual(
      expect.arrayContaining([
        'file_system_tools',
        'git_tools',
        'memory',
        'mcp_reference',
        'sequential_thinking',
      ]),
    );
  });

  it('every tool a benchmark task calls exists in the toolset the task activates', () => {
    for (const task of [...benchTasks('http://127.0.0.1:9'), ...dataTasks('http://127.0.0.1:9')]) {
      const active = new Set<string>();
      for (const actions of task.turns) {
        for (const a of actions) {
          if ('activate' in a) for (const id of a.activate) active.add(id);
          if ('tool' in a) {
            const owner = stack.catalog.tools.get(a.tool)?.toolset;
            expect(owner, `${task.key}: ${a.tool}`).toBeDefined();
            expect(active.has(owner as string), `${task.key}: ${a.tool} needs ${owner} active`).toBe(true);
          }
          if ('deactivate' in a) for (const id of a.deactivate) active.delete(id);
        }
      }
      expect(active.size, `${task.key} leaves toolsets active`).toBe(0);
    }
  });
});

describe('the tasks in three arms', () => {
  const tasks = benchTasks('http://127.0.0.1:9');

  it('has twelve multi-step tasks, each scripted the same way in every arm but for how tools are reached', () => {
    expect(tasks.length).toBeGreaterThanOrEqual(12);
    for (const task of tasks) {
      const native = scriptFor(task, 'native');
      const dispatch = scriptFor(task, 'dispatch');
      const all = scriptFor(task, 'all-loaded');
      expect(native.length).toBeGreaterThanOrEqual(4);
      expect(dispatch.length).toBe(native.length);
      const calls = (s: typeof native) => s.flatMap((t) => ('calls' in t ? t.calls : []));
      // All-loaded: no toolset calls, and fewer turns exactly where a turn held nothing else.
      expect(calls(all).some((c) => c.name === 'manage_toolsets')).toBe(false);
      const toolCalls = calls(native).filter((c) => c.name !== 'manage_toolsets');
      expect(calls(all)).toEqual(toolCalls);
      // Dispatch: the same tools with the same arguments, through call_tool, under the same call ids.
      const dispatched = calls(dispatch).filter((c) => c.name !== 'manage_toolsets');
      expect(dispatched.map((c) => c.id)).toEqual(toolCalls.map((c) => c.id));
      expect(dispatched.map((c) => c.arguments)).toEqual(
        toolCalls.map((c) => ({ name: c.name, arguments: c.arguments })),
      );
      expect(native.at(-1)).toEqual({ answer: task.answer });
    }
    expect(armScripts(tasks).size).toBe(tasks.length * ARMS.length);
  });

  it('activation without a turn: the same tool calls in as many replies as all-loaded, deactivations kept', () => {
    for (const task of tasks) {
      const all = scriptFor(task, 'all-loaded');
      // Primed with a toolset it does not need, the model deactivates it with its first call, not alone.
      const direct = scriptFor(directTask(primedTask(task, new Set(['github_projects']))), 'auto');
      expect(direct.length).toBe(all.length);
      const calls = (s: typeof all) => s.flatMap((t) => ('calls' in t ? t.calls : []));
      const made = (s: typeof all) => calls(s).map((c) => [c.name, c.arguments]);
      expect(made(direct).filter(([name]) => name !== 'manage_toolsets')).toEqual(made(all));
      const toggles = calls(direct).filter((c) => c.name === 'manage_toolsets');
      expect(toggles.every((c) => c.arguments.action === 'DEACTIVATE')).toBe(true);
      expect(toggles[0]?.arguments.toolset_ids).toEqual(['github_projects']);
    }
  });

  it('code mode: each native reply’s tool calls are one run_code script calling those tools, toggles unchanged', () => {
    for (const task of tasks) {
      const native = scriptFor(task, 'native');
      const code = scriptFor(task, 'code');
      expect(code.length, task.key).toBe(native.length);
      for (const [i, turn] of native.entries()) {
        const theirs = code[i];
        if (!('calls' in turn) || !('calls' in theirs)) {
          expect(theirs).toEqual(turn);
          continue;
        }
        const toggles = (t: typeof turn) => t.calls.filter((c) => c.name === 'manage_toolsets');
        expect(toggles(theirs).map((c) => c.arguments)).toEqual(toggles(turn).map((c) => c.arguments));
        const tools = turn.calls.filter((c) => c.name !== 'manage_toolsets');
        const runs = theirs.calls.filter((c) => c.name === 'run_code');
        expect(runs).toHaveLength(tools.length > 0 ? 1 : 0);
        for (const t of tools) expect(String(runs[0].arguments.code)).toContain(`${scriptName(t.name)}(`);
      }
    }
  });

  it('the data-heavy tasks: fewer replies in code mode, each script calling only tools active by then', () => {
    const data = dataTasks('http://127.0.0.1:9');
    expect(data).toHaveLength(4);
    for (const task of data) {
      expect(task.dataHeavy).toBe(true);
      const native = scriptFor(task, 'native');
      const code = scriptFor(task, 'code');
      expect(code.length / native.length, task.key).toBeLessThanOrEqual(0.6 + 1e-9);
      expect(code.at(-1)).toEqual({ answer: task.answer });
      const nativeTools = new Set(
        task.turns.flat().flatMap((a) => ('tool' in a ? [scriptName(a.tool)] : [])),
      );
      const scripts = code.flatMap((t) => ('calls' in t ? t.calls : [])).filter((c) => c.name === 'run_code');
      expect(scripts.length).toBeGreaterThan(0);
      for (const s of scripts) {
        const called = [...String(s.arguments.code).matchAll(/\b([a-z_]+)\(\{/g)].map((m) => m[1]);
        for (const name of called) expect(nativeTools.has(name), `${task.key}: ${name}`).toBe(true);
      }
    }
  });

  it('the mock model plays a task’s turn by the goal’s marker and records what it was sent', async () => {
    const script = scriptFor(tasks[0], 'native');
    const model = await startMockModel({
      record: true,
      script: (key, turn) => (key === 'k1' ? script[turn] : undefined),
    });
    try {
      const body = {
        model: 'm',
        messages: [
          { role: 'system', content: 's' },
          { role: 'user', content: `${goalMarker('k1')} do it` },
          { role: 'assistant', content: null, tool_calls: [] },
        ],
      };
      const res = await fetch(`${model.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(await res.json()).toEqual(completion(script[1]));
      expect(model.requests).toEqual([
        expect.objectContaining({ key: 'k1', turn: 1, body: JSON.stringify(body) }),
      ]);
      const stats = await (await fetch(model.url.replace(/\/v1$/, '/stats'))).json();
      expect(stats.arrivals).toEqual([expect.objectContaining({ key: 'k1', turn: 1 })]);
    } finally {
      await model.close();
    }
  });

  it('the mock model streams a turn, piece by piece, as the agent-server reads an OpenAI-compatible stream', async () => {
    const turns = [
      { calls: [{ id: 'c1', name: 'read_file', arguments: { path: 'notes/a long name.txt' } }] },
      { answer: 'The notes say: ship on Friday.' },
    ];
    const model = await startMockModel({ script: (_key, turn) => turns[turn], chunkGapMs: 1 });
    try {
      const client = openAIModel({ baseURL: model.url, timeoutMs: 5000, maxAttempts: 1, stream: true });
      const ask = (messages: { role: 'user' | 'assistant'; content: string }[]) => {
        const deltas: string[] = [];
        const reply = client.complete(
          { model: 'm', messages, tools: [] },
          { onDelta: (t) => deltas.push(t) },
        );
        return reply.then((r) => ({ ...r, deltas }));
      };
      const first = await ask([{ role: 'user', content: `${goalMarker('k')} go` }]);
      expect(first).toMatchObject({
        content: null,
        finish_reason: 'tool_calls',
        tool_calls: [
          { id: 'c1', function: { name: 'read_file', arguments: '{"path":"notes/a long name.txt"}' } },
        ],
        usage: { total_tokens: 0 },
        deltas: [],
      });
      expect(first).not.toHaveProperty('usage_missing');
      const second = await ask([
        { role: 'user', content: `${goalMarker('k')} go` },
        { role: 'assistant', content: 'read it' },
      ]);
      expect(second).toMatchObject({ content: 'The notes say: ship on Friday.', finish_reason: 'stop' });
      // Pieces of four characters: a model's tokens.
      expect(second.deltas).toEqual(['The ', 'note', 's sa', 'y: s', 'hip ', 'on F', 'rida', 'y.']);
    } finally {
      await model.close();
    }
  });
});

/** A request body as the agent sends it: tools, then messages. */
function request(key: string, turn: number, tools: string[], messages: string[]): RecordedRequest {
  const body = {
    model: 'm',
    messages: messages.map((content, i) => ({ role: i === 0 ? 'system' : 'user', content })),
    tools: tools.map((name) => ({
      type: 'function',
      function: { name, description: `${name} does one thing`, parameters: { type: 'object' } },
    })),
  };
  return { key, turn, body: JSON.stringify(body), at: 0 };
}

describe('the token-economics figures', () => {
  const counter = createTokenCounter();
  const toggle = { calls: [{ id: 'c', name: 'manage_toolsets', arguments: { action: 'ACTIVATE' } }] };
  const work = { calls: [{ id: 'w', name: 'read', arguments: {} }] };
  const long = 'word '.repeat(1500);

  it('measures the prefix kept between requests, with and without a toggle, and counts the cache as OpenAI does', () => {
    const scripts = new Map([
      ['native:t', [toggle, work, { answer: 'done' }]],
      ['dispatch:t', [toggle, work, { answer: 'done' }]],
      ['all-loaded:t', [work, { answer: 'done' }]],
    ]);
    const requests = [
      // Native: the toggle changes the tools, the next step extends the one before.
      request('native:t', 0, ['manage_toolsets'], [long, 'goal']),
      request('native:t', 1, ['manage_toolsets', 'read'], [long, 'goal', 'activated']),
      request('native:t', 2, ['manage_toolsets', 'read'], [long, 'goal', 'activated', 'read it']),
      request('dispatch:t', 0, ['manage_toolsets', 'call_tool'], [long, 'goal']),
      request('dispatch:t', 1, ['manage_toolsets', 'call_tool'], [long, 'goal', 'activated']),
      request('dispatch:t', 2, ['manage_toolsets', 'call_tool'], [long, 'goal', 'activated', 'read it']),
      request('all-loaded:t', 0, ['manage_toolsets', 'read', 'other'], ['short', 'goal']),
      request('all-loaded:t', 1, ['manage_toolsets', 'read', 'other'], ['short', 'goal', 'read it']),
    ];
    const [native, dispatch, all] = economics(requests, scripts, counter);
    expect(native.prefixSteady).toBe(1);
    expect(native.prefixToggle).toBeLessThan(0.2);
    expect(dispatch.prefixToggle).toBe(1);
    expect(dispatch.prefixAll).toBe(1);
    expect(native.modelCallsPerTask).toBe(3);
    expect(all.modelCallsPerTask).toBe(2);
    // Dispatch's later requests reuse the long system prompt; a prompt under 1,024 tokens is never cached.
    expect(dispatch.cachedShare).toBeGreaterThan(0.5);
    expect(all.cachedShare).toBe(0);
    expect(all.costPerTask).toBeCloseTo(all.costPerTaskUncached, 10);
    expect(dispatch.costPerTask).toBeLessThan(dispatch.costPerTaskUncached);
    const tools = counter.tools(
      ['manage_toolsets', 'call_tool'].map((name) => ({
        name,
        description: `${name} does one thing`,
        parameters: { type: 'object' },
      })),
    );
    expect(dispatch.toolTokensPerRequest).toBe(tools);
    expect(PRICE.cachedInputPerM / PRICE.inputPerM).toBe(0.25);
  });
});

describe('code mode’s goals', () => {
  it('judges them from one run’s code and native figures, and has none without a code arm', () => {
    const fig = (arm: string, tokens: number, calls: number) =>
      ({
        arm,
        inputTokensPerTask: tokens,
        modelCallsPerTask: calls,
        costPerTask: tokens / 1e6,
      }) as ArmFigures;
    const run = {
      tasks: 12,
      dataTasks: 4,
      arms: [fig('native', 1000, 6), fig('code', 1040, 6)],
      dataArms: [fig('native', 3000, 5), fig('code', 1600, 3)],
    } as unknown as TokenRun;
    const judged = codeGoals(run);
    expect(judged.map((g) => g.met)).toEqual([false, true, true, true, null]);
    expect(judged[0].measured).toMatch(/^0\.533 \(1,600 vs 3,000\)/);
    expect(judged[2].measured).toMatch(/^1\.040/);
    expect(codeGoals({ ...run, arms: [fig('native', 1000, 6)] } as unknown as TokenRun)).toEqual([]);
  });
});

/** A learned-recall figure: held-out recall@1 before and after (recall@3 0.9), three poisoning cases. */
function taught(before: number, after: number) {
  const split = (at1: number) => ({ needs: 136, recallAt1: at1, recallAt3: 0.9 });
  return {
    terms: 400,
    before: { heldOut: split(before), tune: split(0.8) },
    after: { heldOut: split(after), tune: { needs: 133, recallAt1: 0.95, recallAt3: 0.97 } },
    poisoning: [1, 20, 20].map((tasks, i) => ({
      tasks,
      users: i === 2 ? 5 : 1,
      need: 'a need',
      want: 'right',
      wrong: 'wrong',
      first: i === 2 ? 'wrong' : 'right',
      heldOut: split(after),
    })),
  };
}

describe('the report', () => {
  it('lists every figure with its goal, and says which goals were missed', () => {
    const armFigures = (
      arm: 'native' | 'dispatch' | 'all-loaded',
      tools: number,
      input: number,
      calls: number,
    ) => ({
      arm,
      tasks: 12,
      requests: calls * 12,
      toolTokensPerRequest: tools,
      definitionsInMessagesPerTask: 0,
      inputTokensPerTask: input,
      modelCallsPerTask: calls,
      prefixSteady: 1,
      prefixToggle: arm === 'native' ? 0.1 : 1,
      prefixAll: 1,
      prefixSteadyMin: 1,
      cachedShare: 0.8,
      costPerTask: 0.01,
      costPerTaskUncached: 0.03,
      outputTokensPerTask: 100,
    });
    const memory = {
      rss: 300 * 2 ** 20,
      heapUsed: 100 * 2 ** 20,
      heapTotal: 120 * 2 ** 20,
      external: 5e6,
      spaces: { old: 8e7 },
    };
    const results: BenchResults = {
      machine: {
        cpu: 'cpu',
        cores: 2,
        memoryGiB: 8,
        os: 'linux',
        node: 'v20',
        date: '2026-01-01T00:00:00Z',
        commit: 'abc',
        loadAtStart: 0.5,
      },
      durationS: 120,
      tokens: {
        catalog: { toolsets: 20, tools: 167, recorded: 13, upstream: [] },
        arms: [
          armFigures('native', 1000, 16000, 6),
          armFigures('dispatch', 300, 19000, 6),
          armFigures('all-loaded', 35000, 170000, 4),
        ],
        recall: {
          toolsets: 20,
          tools: 167,
          needs: 60,
          recallAt1: 0.85,
          recallAt3: 0.95,
          msPerQuery: 2,
          misses: [],
        },
        problems: [],
        tasks: 12,
      },
      scale: {
        toolsets: 33,
        tools: 284,
        needs: 60,
        recallAt1: 0.85,
        recallAt3: 0.93,
        msPerQuery: 2,
        misses: [],
      },
      learned: {
        days: 60,
        tasks: 399,
        shipped: taught(0.85, 0.85),
        bare: taught(0.69, 0.74),
      },
      latency: {
        bareRtt: 0.3,
        echo: { direct: 0.5, viaGateway: 1.1 },
        delay: { direct: 22, viaGateway: 23.5 },
        toggle: { manage: 0.6, call: 0.8 },
        step: { ownMsPerStep: 2.4, steps: 400, tasks: 50, bareRtt: 0.3 },
        rounds: 400,
      },
      eventLog: {
        storeRecordsPerS: 30000,
        rawInsertsPerS: 40000,
        rawRunPerS: 20000,
        rawBatchedPerS: 40000,
        batch: 50,
        recordBytes: 330,
        records: 10000,
      },
      concurrency: {
        layout: 'npm-start',
        tasks: 1000,
        latencyMs: 1000,
        turnsPerTask: 6,
        completed: 1000,
        failed: [],
        windowS: 10,
        turnsPerS: 300,
        idealTurnsPerS: 1000,
        turnLatencyP50Ms: 2000,
        turnLatencyP99Ms: 4000,
        cpuMsPerTurn: 3.5,
        wallS: 25,
        idle: memory,
        peakRss: 700 * 2 ** 20,
        after: memory,
        rssPerHeldTaskBytes: 400 * 1024,
      },
      concurrencyVariants: [],
      memory: [
        { stage: 'node', rss: 70e6, heapUsed: 5e6, external: 2e6, arrayBuffers: 0 },
        { stage: 'services', rss: 250e6, heapUsed: 90e6, external: 5e6, arrayBuffers: 0 },
      ],
      memoryTwoThreads: [
        { stage: 'node', rss: 70e6, heapUsed: 5e6, external: 2e6, arrayBuffers: 0 },
        { stage: 'second thread', rss: 390e6, heapUsed: 60e6, external: 5e6, arrayBuffers: 0 },
      ],
      startup: {
        before: {
          label: 'tsx start/start.ts (before)',
          runs: 5,
          readyMs: { median: 1600, max: 1900 },
          idleRssMiB: { median: 260, max: 270 },
        },
        after: {
          label: 'node bin/toolshift.js serve (after)',
          runs: 5,
          readyMs: { median: 800, max: 900 },
          idleRssMiB: { median: 170, max: 180 },
        },
      },
    };
    const byFigure = Object.fromEntries(goals(results).map((g) => [g.figure, g]));
    expect(byFigure['2. Model calls per task, dynamic / all-loaded'].met).toBe(false);
    expect(byFigure['6. Gateway hop, 20 ms tool, p50 via gateway / direct'].met).toBe(false);
    expect(byFigure['8. Toggle round trip / plain tool call (p50)'].met).toBe(true);
    expect(byFigure['10. Step records/s through the task store / raw inserts (WAL)'].measured).toMatch(
      /^0\.75 /,
    );
    const text = renderReport(results);
    expect(text).toMatch(/^# Benchmarks\n/);
    // Learning from use is a figure, not a goal: its table, and each poisoning case.
    expect(text).toContain(
      '| no keywords | 69.0% / 90.0% | 74.0% / 90.0% | 80.0% / 90.0% | 95.0% / 97.0% | 400 |',
    );
    expect(text).toContain(
      '- 20 tasks of 5 user(s): the need ranks wrong first (shipped) and wrong (no keywords)',
    );
    expect(goals(results).some((g) => /learn/i.test(g.figure))).toBe(false);
    expect(text).toContain('Machine: cpu, 2 cores, 8 GiB, linux, Node v20.');
    expect(text).toMatch(
      /\| 2\. Model calls per task, dynamic \/ all-loaded \| 1\.500 \| ≤ 1\.25 \| \*\*missed\*\* \|/,
    );
    expect(text).toMatch(
      /\| 9\. 1,000 concurrent tasks on `npm start`: model turns\/s vs Little's-law ideal \| 0\.30 \(300 of 1,000 turns\/s\) \| ≥ 0\.8 \| \*\*missed\*\* \|/,
    );
    expect(byFigure['1. CPU of the services per model turn (1,000 concurrent tasks)']).toMatchObject({
      goal: '≤ 1.5 ms',
      met: false,
    });
    expect(
      byFigure['7. toolshift’s own time per model step / bare round trip, median of 1 runs'],
    ).toMatchObject({
      measured: '8.00× (2.40 ms; runs 8.00)',
      goal: '≤ 6×',
      met: false,
    });
    // Figure 9 is npm start's (the other layouts beside it); figure 15's tracing-off runs decide figure 7.
    const threeProcesses = {
      ...results.concurrency,
      layout: 'separate' as const,
      turnsPerS: 850,
      turnLatencyP99Ms: 1800,
      cpuMsPerTurn: 1.4,
    };
    const overHttp = { ...results.concurrency, layout: 'npm-start-http' as const, cpuMsPerTurn: 5 };
    const off = (ms: number) => ({ ownMsPerStep: ms, bareRtt: 0.3, steps: 320, exportedBytes: 0 });
    const more = goals({
      ...results,
      concurrencyVariants: [threeProcesses, overHttp],
      concurrency: { ...results.concurrency, turnsPerS: 810, turnLatencyP99Ms: 1900, cpuMsPerTurn: 1.45 },
      tracing: {
        off: [off(1.5), off(1.2), off(3)],
        on: [],
        offMs: 1.5,
        onMs: 2,
        offRtt: 0.3,
        onRtt: 0.3,
        tasks: 40,
      },
    });
    const byMore = Object.fromEntries(more.map((g) => [g.figure, g]));
    expect(
      byMore["9. 1,000 concurrent tasks on `npm start`: model turns/s vs Little's-law ideal"],
    ).toMatchObject({ met: true });
    expect(byMore['9. p99 turn latency on `npm start`']).toMatchObject({
      measured: '1.90 s (three processes 1.80 s)',
      met: true,
    });
    expect(
      byMore['7. toolshift’s own time per model step / bare round trip, median of 3 runs'],
    ).toMatchObject({
      measured: '5.00× (1.50 ms; runs 4.00, 5.00, 10.00; the latency part’s run 8.00×)',
      met: true,
    });
    expect(byMore['1. CPU of the services per model turn (1,000 concurrent tasks)']).toMatchObject({
      measured:
        '1.45 ms on `npm start`; 5.00 ms with its services over HTTP; 1.40 ms at the least (separate)',
      met: true,
    });
    expect(text).toContain('gpt-4.1');
    expect(
      byFigure['12. npm start on type stripping / on tsx: ready time, idle resident memory (medians)'],
    ).toMatchObject({
      measured: '0.50 (800.00 ms vs 1600.00 ms), 0.65 (170 vs 260 MiB)',
      met: true,
    });
    expect(text).toContain(
      '| node bin/toolshift.js serve (after) | 800.00 ms | 900.00 ms | 170.0 MiB | 180.0 MiB |',
    );
    expect(text).toContain('After / before: ready 0.50×, idle resident 0.65× (medians).');
    expect(armKey('native', benchTasks('x')[0])).toBe('native:t01-project-overview');
    // Figure 17: a replica's /health and another session's call under 50 ms while a session's row is held,
    // and its event loop's p99 under 20 ms under load; a report without them (made before) lists neither.
    expect(Object.keys(byFigure).filter((f) => f.startsWith('17.'))).toEqual([]);
    const replicaRun = (healthMax: number, p99: number) => ({
      disableMs: { p50: 4, p95: 10, max: 12, rounds: 30 },
      callMs: { sqlite: 3, postgres: 3.5, calls: 400 },
      lock: {
        healthMs: { p50: 1.2, max: healthMax },
        otherCallMs: { p50: 2.5, max: 7 },
        samples: 20,
        lockedWaitedMs: 180,
      },
      loop: { p50: 10.1, p99, max: 30, clients: 32, seconds: 4, requests: 9000 },
    });
    const replicas = (healthMax: number, p99: number) =>
      goals({ ...results, replicas: replicaRun(healthMax, p99) }).filter((g) => g.figure.startsWith('17.'));
    const fine = replicas(3, 14);
    expect(fine.map((g) => g.met)).toEqual([true, true]);
    expect(fine[0].measured).toBe(
      "3 ms / 7 ms (p50 1.2 / 2.5 ms; the locked session's request waited 180.00 ms)",
    );
    expect(replicas(60, 14).map((g) => g.met)).toEqual([false, true]);
    expect(replicas(3, 25).map((g) => g.met)).toEqual([true, false]);
    expect(renderReport({ ...results, replicas: replicaRun(3, 14) })).toContain(
      '## 17. A gateway replica never waits on PostgreSQL with its event loop',
    );
    // Figure 18: CPU per turn with streaming on against off, met at no more than 1.05×, with its runs.
    expect(Object.keys(byFigure).filter((f) => f.startsWith('18.'))).toEqual([]);
    const run = (cpuMsPerTurn: number) => ({ cpuMsPerTurn, turns: 1200, completed: 200, failed: [] });
    const streaming = (onCpuMs: number) => ({
      off: [run(2), run(2.2)],
      on: [run(onCpuMs), run(2.2)],
      offCpuMs: 2,
      onCpuMs,
      tasks: 200,
      latencyMs: 500,
      chunkGapMs: 5,
    });
    const figure18 = (onCpuMs: number) =>
      goals({ ...results, streaming: streaming(onCpuMs) }).filter((g) => g.figure.startsWith('18.'));
    expect(figure18(2.1)).toEqual([
      {
        figure: "18. The services' CPU per model turn, streaming off → on, median of runs",
        measured: '2.00 ms → 2.10 ms (1.05×)',
        goal: '≤ 1.05×',
        met: true,
      },
    ]);
    expect(figure18(2.2)[0].met).toBe(false);
    const report = renderReport({ ...results, streaming: streaming(2.1) });
    expect(report).toContain('## 18. Streaming off and on');
    expect(report).toContain('| 1 | 2.00 ms | 2.10 ms | 200/200 / 200/200 |');
    // Figure 21: bytes written by a task's checkpoints against its final conversation, the worse database's,
    // met at no more than 3× when a claim gives the same state back and the task's end leaves no part behind.
    expect(Object.keys(byFigure).filter((f) => f.startsWith('21.'))).toEqual([]);
    const ckpt = (database: 'SQLite' | 'PostgreSQL', afterBytes: number, same = true, left = 0) => ({
      database,
      beforeBytes: 500_000,
      afterBytes,
      parts: 20,
      partsAfterEnd: left,
      sameOnClaim: same,
    });
    const figure21 = (arms: ReturnType<typeof ckpt>[]) =>
      goals({ ...results, checkpoints: { steps: 20, conversationBytes: 50_000, arms } }).filter((g) =>
        g.figure.startsWith('21.'),
      );
    expect(figure21([ckpt('SQLite', 80_000), ckpt('PostgreSQL', 90_000)])).toEqual([
      {
        figure: '21. Bytes written by checkpoints per 20-step task / the final conversation (PostgreSQL)',
        measured: '1.80× (whole checkpoints: 10.00×; 90,000 vs 500,000 of 50,000 bytes)',
        goal: '≤ 3×',
        met: true,
      },
    ]);
    expect(figure21([ckpt('SQLite', 150_001)])[0].met).toBe(false);
    expect(figure21([ckpt('SQLite', 80_000, false)])[0].met).toBe(false);
    expect(figure21([ckpt('SQLite', 80_000, true, 3)])[0].met).toBe(false);
    expect(figure21([])).toEqual([]);
    expect(
      renderReport({
        ...results,
        checkpoints: { steps: 20, conversationBytes: 50_000, arms: [ckpt('SQLite', 80_000)] },
      }),
    ).toContain('| SQLite | 500,000 (10.00×) | 80,000 (1.60×) | 20 / 0 | yes |');
  });
});

describe('npm run bench', () => {
  it('loads every module of the benchmark outside vitest, as npm run bench does', () => {
    // Entry points (run.ts, only.ts) start measuring when loaded; every other module must load in a plain
    // Node process: a test helper that needs vitest's runner once broke the whole benchmark at import.
    const modules = readdirSync('bench')
      .filter(
        (f) =>
          f.endsWith('.ts') &&
          ![
            'run.ts',
            'only.ts',
            'mock-model-main.ts',
            'concurrency-script.ts',
            'memory-parts.ts',
            'gateway-probe.ts',
          ].includes(f),
      )
      .map((f) => `./bench/${f}`);
    const loaded = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `for (const m of ${JSON.stringify(modules)}) await import(m);`],
      { encoding: 'utf8', env: { PATH: process.env.PATH }, timeout: 60_000 },
    );
    expect(loaded.stderr).not.toMatch(/Error/);
    expect(loaded.status).toBe(0);
  });
});
