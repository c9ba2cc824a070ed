import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { createTaskStore } from '../agent-server/store/store.ts';
import { loadConfig } from '../lib/config/config.ts';
import { openDatabase } from '../lib/db/sqlite.ts';
import type { Listening } from '../lib/http/serve.ts';
import { startStack } from '../start/stack.ts';

// The console's pages on a full store (bench/run.ts figure 14): 10,000 tasks in the agent's store and 100,000
// audit rows in the gateway's, on the embedded default (SQLite). Each page is asked for `rounds` times over
// loopback by a logged-in client; the figure is each page's median and slowest time to its whole answer,
// which bounds the server's time from above (the goal: under 50 ms each).

export interface ConsoleRun {
  tasks: number;
  auditRows: number;
  rounds: number;
  /** Per page: median and slowest milliseconds to the whole answer. */
  pages: { page: string; p50: number; max: number }[];
}

const TOKENS = {
  AGENT_API_TOKEN: 'ts_api_bench-console',
  GATEWAY_ADMIN_TOKEN: 'ts_admin_bench-console',
  GATEWAY_AGENT_TOKEN: 'ts_agent_bench-console',
  VIEWER_TOKEN: 'ts_viewer_bench-console',
  TOOL_SERVER_TOKEN: 'ts_toolserver_bench-console',
};

const KINDS = ['call', 'activate', 'deactivate', 'approval', 'enable', 'disable'];
const TOOLS = ['read_text_file', 'write_file', 'search_files', 'git_status', 'web_fetch', 'run_query'];

export async function consoleRun(tasks = 10_000, auditRows = 100_000, rounds = 20): Promise<ConsoleRun> {
  const tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-bench-console-'));
  const data = path.join(tmp, 'data');
  const running: Listening[] = [];
  try {
    await mkdir(path.join(tmp, 'ws'), { recursive: true });
    const config = loadConfig({
      ...TOKENS,
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      TOOLSHIFT_DATA_DIR: data,
      FS_ROOTS: path.join(tmp, 'ws'),
      LOG_LEVEL: 'silent',
    });
    // First start: the schemas. Then the rows, written straight into the stores while nothing runs.
    for (const s of Object.values(await startStack(config))) await s.close();
    const store = createTaskStore(openDatabase(path.join(data, 'agent.db')));
    const statuses = ['completed', 'completed', 'completed', 'failed', 'cancelled'] as const;
    for (let i = 0; i < tasks; i++) {
      const id = `task_bench_${String(i).padStart(6, '0')}`;
      await store.createTask(id, `ses_${i % 500}`, `goal number ${i}: summarise file ${i % 97}.md`);
      store.appendEvent(id, 'task_started', null, { task_id: id });
      await store.finishTask(id, {
        status: statuses[i % statuses.length],
        final_answer: 'done',
        error: i % 5 === 3 ? 'Model call failed: the endpoint answered 429' : null,
        steps: 3,
        usage: { prompt_tokens: 900, completion_tokens: 40, total_tokens: 940 },
        toolsets_used: ['file_system_tools'],
        tokens: null,
      } as never);
    }
    await store.close();
    const gateway = new Database(path.join(data, 'gateway.db'));
    const insert = gateway.prepare(
      'INSERT INTO audit (at, session_id, task_id, actor, kind, subject, ok, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    );
    const start = Date.now() - auditRows * 1000;
    gateway.transaction(() => {
      for (let i = 0; i < auditRows; i++) {
        const task = `task_bench_${String(i % tasks).padStart(6, '0')}`;
        insert.run(
          new Date(start + i * 1000).toISOString(),
          `ses_${i % 500}`,
          task,
          i % 10 === 0 ? 'admin' : `model in task ${task}`,
          KINDS[i % KINDS.length],
          TOOLS[i % TOOLS.length],
          i % 7 === 0 ? 0 : 1,
          i % 7 === 0 ? 'policy rule 1 (tool write_file)' : null,
        );
      }
    })();
    gateway.close();

    const { tools, gateway: gw, agent } = await startStack(config);
    running.push(agent, gw, tools);
    const login = await fetch(`${agent.url}/console/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: TOKENS.GATEWAY_ADMIN_TOKEN }),
    });
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
    const pages = [
      '/console/',
      '/console/toolsets',
      '/console/tasks',
      '/console/tasks?status=failed',
      '/console/tasks?goal=no+such+goal',
      '/console/tasks?after=task_bench_005000',
      '/console/tasks/task_bench_004321',
      '/console/approvals',
      '/console/audit',
      '/console/audit?actor=admin',
      '/console/audit?tool=write_file&outcome=refused',
      '/console/audit?actor=nobody',
      '/console/run',
    ];
    const results: ConsoleRun['pages'] = [];
    for (const page of pages) {
      const times: number[] = [];
      for (let i = 0; i < rounds + 2; i++) {
        const t0 = performance.now();
        const res = await fetch(`${agent.url}${page}`, { headers: { cookie } });
        const body = await res.text();
        if (res.status !== 200) throw new Error(`${page} answered ${res.status}: ${body.slice(0, 200)}`);
        // The first two warm the statements and the connections.
        if (i >= 2) times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      results.push({
        page,
        p50: Number(times[Math.floor(times.length / 2)].toFixed(2)),
        max: Number(times[times.length - 1].toFixed(2)),
      });
    }
    return { tasks, auditRows, rounds, pages: results };
  } finally {
    for (const s of running) await s.close();
    await rm(tmp, { recursive: true, force: true });
  }
}
