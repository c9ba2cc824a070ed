import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentServer } from '../../../agent-server/server.ts';
import { loadConfig } from '../../../lib/config/config.ts';
import { freshDatabase } from '../../helpers/postgres.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// The agent-server on PostgreSQL (DATABASE_URL) through its HTTP API: a task streamed, stored and read back by
// a restarted agent-server, as on SQLite.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('tasks on PostgreSQL', () => {
  it('streams a task, stores its events gap-free, and a restarted agent-server serves it', async () => {
    const databaseUrl = await freshDatabase('agent');
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
      calls(call('write_file', { path: 'pg.txt', content: 'stored in postgres' })),
      answer('written'),
    ]);
    stack = await makeStack({ model, databaseUrl });
    const res = await stack.agentApp.request('/agent/execute_task', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ goal: 'write to postgres' }),
    });
    const text = await res.text();
    const streamed = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
    expect(streamed.at(-1)).toBe('result');
    const taskId = /"task_id":"(task_[^"]+)"/.exec(text)?.[1] as string;
    const dataDir = stack.dataDir;
    await stack.close(true);

    stack = await makeStack({ dataDir, databaseUrl });
    const task = await stack.get(stack.agentApp, `/agent/tasks/${taskId}`);
    expect(task.body).toMatchObject({
      status: 'completed',
      final_answer: 'written',
      goal: 'write to postgres',
    });
    const events = task.body.events as { seq: number; type: string }[];
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.map((e) => e.type)).toEqual(streamed.slice(0, -1));
    const list = await stack.get(stack.agentApp, '/agent/tasks');
    expect(list.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual([taskId]);
  });

  it('the agent-server started with DATABASE_URL keeps its tasks there, not in agent.db', async () => {
    const databaseUrl = await freshDatabase('server');
    const dir = await mkdtemp(path.join(tmpdir(), 'agent-pg-'));
    const agent = await startAgentServer(
      loadConfig({
        AGENT_PORT: '0',
        TOOLSHIFT_DATA_DIR: dir,
        DATABASE_URL: databaseUrl,
        LOG_LEVEL: 'silent',
      }),
    );
    try {
      const res = await fetch(`${agent.url}/agent/tasks`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ tasks: [] });
      expect(existsSync(path.join(dir, 'agent.db'))).toBe(false);
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      const migrated = await client.query('SELECT name FROM agent_migrations');
      await client.end();
      expect(migrated.rowCount).toBeGreaterThan(0);
    } finally {
      await agent.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
