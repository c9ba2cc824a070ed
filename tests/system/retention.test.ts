import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { startAgentServer } from '../../agent-server/server.ts';
import { createTaskStore } from '../../agent-server/store/store.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { startRetention } from '../../lib/db/retention.ts';
import { type Db, openDatabase } from '../../lib/db/sqlite.ts';
import { approvalStore } from '../../mcp-gateway/ceiling/approvals.ts';
import { handleStore } from '../../mcp-gateway/face/handles.ts';
import { startGateway } from '../../mcp-gateway/server.ts';
import { gatewayRetentionRules } from '../../mcp-gateway/store/retention.ts';
import { openGatewayState } from '../../mcp-gateway/store/store.ts';
import { startToolServer } from '../../tool-server/server.ts';

// Issue 15 §4, second bullet: nothing was ever deleted. Retention deletes old rows while the daemon runs and
// keeps recent ones, running tasks and pending approvals; a deleted MCP handle takes its session with it.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDb(name: string): Promise<Db> {
  const dir = await mkdtemp(path.join(tmpdir(), 'toolshift-retention-'));
  dirs.push(dir);
  return openDatabase(path.join(dir, name));
}

const DAY = 86_400_000;
const test = { actor: 'test' };
const count = (db: Db, sql: string) => (db.prepare(sql).pluck().get() as number) ?? 0;

describe('retention (issue 15 §4)', () => {
  it('deletes old gateway rows in batches and keeps recent ones, pending approvals, and live handles', async () => {
    const db = await tempDb('gateway.db');
    let clock = Date.now();
    const now = () => clock;
    const state = await openGatewayState({ db });
    const { store } = state;
    // Approvals may wait 60 days here, so one pending since 40 days ago is still pending (and must stay).
    const approvals = approvalStore(state.approvals, { timeoutMs: 60 * DAY, now });
    const handles = handleStore(state.handles, {
      idleMs: DAY,
      now,
      onDrop: (ids) => store.dropSessions(ids),
    });
    const keep = loadConfig({ AUDIT_MAX_ROWS: '5000' }).retention;
    expect(keep).toMatchObject({
      auditMs: 30 * DAY,
      approvalMs: 30 * DAY,
      sessionMs: 30 * DAY,
      taskMs: 30 * DAY,
    });
    // Keyed calls: one begun 40 days ago (with its task's fence), one today.
    const { callKeys } = state;
    const keyed = (key: string, task: string, at: number) =>
      callKeys.begin({ key, session_id: 's', tool: 't', task_id: task, fence: 1, at });
    await keyed('old_key', 'old_task', Date.now() - 40 * DAY);
    await keyed('new_key', 'new_task', Date.now());

    // 40 days ago: 1,200 audit rows (more than two batches), sessions, approvals of every state, a handle.
    clock = Date.now() - 40 * DAY;
    await store.activate('old_rest_session', [], ['fs_read']);
    await store.activate('old_but_pending', [], []);
    for (const [i, status] of ['approve', 'deny', 'expire', 'pending'].entries()) {
      const a = await approvals.request({
        session_id: status === 'pending' ? 'old_but_pending' : 'old_rest_session',
        kind: 'call',
        subject: `tool_${i}`,
        arguments: { i },
        reason: 'policy',
      });
      if (status === 'approve' || status === 'deny')
        await approvals.decide(a.id, status === 'approve', 'admin');
    }
    await store.flush();
    db.prepare("UPDATE approvals SET status = 'expired', decided_at = ? WHERE subject = 'tool_2'").run(clock);
    db.prepare('UPDATE sessions SET created_at = ?').run(new Date(clock).toISOString());
    const insertAudit = db.prepare(
      "INSERT INTO audit (at, session_id, kind, subject, ok, actor) VALUES (?, ?, 'call', 't', 1, 'agent')",
    );
    const oldAt = new Date(clock).toISOString();
    db.transaction(() => {
      for (let i = 0; i < 1200; i++) insertAudit.run(oldAt, 'old_rest_session');
    })();

    // Today: recent rows of every kind, and a recently used session created long ago.
    clock = Date.now();
    // A handle last used 40 days ago (minting sweeps idle ones, so it is aged after the fact).
    const oldHandle = await handles.mint(null);
    await store.activate(oldHandle, [], ['fs_read']);
    const liveHandle = await handles.mint(null);
    await store.activate(liveHandle, [], ['fs_read']);
    db.prepare('UPDATE mcp_handles SET created_at = ?, last_used_at = ? WHERE handle = ?').run(
      clock - 40 * DAY,
      clock - 40 * DAY,
      oldHandle,
    );
    await store.activate('new_session', [], ['fs_read']);
    await store.activate('old_but_used', [], []);
    db.prepare("UPDATE sessions SET created_at = ? WHERE id = 'old_but_used'").run(oldAt);
    store.audit({ session_id: 'old_but_used', kind: 'call', subject: 'read_text_file', ok: true }, test);
    await approvals.request({
      session_id: 'new_session',
      kind: 'call',
      subject: 'x',
      arguments: {},
      reason: 'p',
    });
    await store.flush();
    const counts = () => ({
      audit: count(db, 'SELECT COUNT(*) FROM audit'),
      sessions: count(db, 'SELECT COUNT(*) FROM sessions'),
      session_toolsets: count(db, 'SELECT COUNT(*) FROM session_toolsets'),
      approvals: count(db, 'SELECT COUNT(*) FROM approvals'),
      handles: count(db, 'SELECT COUNT(*) FROM mcp_handles'),
    });
    expect(counts()).toEqual({ audit: 1201, sessions: 6, session_toolsets: 4, approvals: 5, handles: 2 });
    // A learned keyword unused for seven half-lives (210 days) has faded below use: it goes; a fresh one stays.
    const learned = db.prepare(
      "INSERT INTO learned_keywords (toolset_id, term, weight, tasks, users, last_user, updated_at) VALUES ('mail', ?, 64, 64, 2, '', ?)",
    );
    learned.run('stale', clock - 211 * 86_400_000);
    learned.run('fresh', clock);

    const retention = startRetention(gatewayRetentionRules(keep, { store, approvals, handles, callKeys }), {
      intervalMs: 3_600_000,
      now,
    });
    const deleted = await retention.runOnce();
    await retention.stop();
    expect(deleted).toEqual({
      audit: 1200,
      audit_over_cap: 0,
      approvals: 3,
      mcp_handles: 1,
      sessions: 1,
      call_keys: 2,
      learned_keywords: 1,
    });
    expect(db.prepare('SELECT term FROM learned_keywords').pluck().all()).toEqual(['fresh']);
    expect(db.prepare('SELECT key FROM call_keys').pluck().all()).toEqual(['new_key']);
    expect(db.prepare('SELECT task_id FROM task_fences').pluck().all()).toEqual(['new_task']);
    expect(counts()).toEqual({ audit: 1, sessions: 4, session_toolsets: 2, approvals: 2, handles: 1 });
    expect(db.prepare('SELECT id FROM sessions ORDER BY id').pluck().all()).toEqual(
      [liveHandle, 'new_session', 'old_but_pending', 'old_but_used'].sort(),
    );
    expect(db.prepare('SELECT status FROM approvals').pluck().all()).toEqual(['pending', 'pending']);
    // What survives still works: the live handle resolves to its session with its toolsets.
    expect((await store.load(await handles.use(liveHandle, null))).toolsets).toEqual(['fs_read']);
    await state.close();
  });

  it('caps the audit table at AUDIT_MAX_ROWS, oldest first, whatever their age', async () => {
    const db = await tempDb('gateway.db');
    const state = await openGatewayState({ db });
    const { store } = state;
    const approvals = approvalStore(state.approvals, { timeoutMs: 600_000 });
    const handles = handleStore(state.handles, { idleMs: DAY });
    for (let i = 0; i < 2500; i++)
      store.audit({ session_id: 's', kind: 'call', subject: `t${i}`, ok: true }, test);
    await store.flush();
    const keep = loadConfig({ AUDIT_MAX_ROWS: '1000', AUDIT_RETENTION_DAYS: '0' }).retention;
    expect(keep.auditMs).toBe(0);
    const retention = startRetention(gatewayRetentionRules(keep, { store, approvals, handles }), {
      intervalMs: 3_600_000,
    });
    expect((await retention.runOnce()).audit_over_cap).toBe(1500);
    await retention.stop();
    const page = await store.listAudit({ limit: 1000 });
    expect(page.audit).toHaveLength(1000);
    expect(page.audit[0].subject).toBe('t2499');
    expect(page.audit[999].subject).toBe('t1500');
    expect(page.next_cursor).not.toBeNull();
    expect((await store.listAudit({ limit: 10, cursor: page.next_cursor ?? '' })).audit).toEqual([]);
    await state.close();
  });

  it('deletes finished tasks with their events and keeps running, paused and recent ones', async () => {
    const db = await tempDb('agent.db');
    const store = createTaskStore(db);
    const outcome = {
      status: 'completed' as const,
      final_answer: 'done',
      error: null,
      steps: 1,
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      toolsets_used: [],
      tokens: {
        tokenizer: 'o200k_base',
        requests: 1,
        tool_definition_tokens: 0,
        all_toolsets_tool_tokens: 0,
        message_tokens: 0,
      },
    };
    for (let i = 0; i < 120; i++) {
      await store.createTask(`task_old_${i}`, 's', 'old goal');
      for (let e = 0; e < 5; e++) store.appendEvent(`task_old_${i}`, 'model_call', 1, { e });
      await store.finishTask(`task_old_${i}`, outcome);
    }
    await store.createTask('task_old_running', 's', 'still running');
    await store.createTask('task_old_paused', 's', 'waits for a human');
    await store.pause('task_old_paused', { approval_id: 'apr_1' }, { messages: [] }, 1);
    await store.createTask('task_new', 's', 'new');
    await store.finishTask('task_new', outcome);
    await store.flush();
    const old = new Date(Date.now() - 40 * DAY).toISOString();
    db.prepare("UPDATE tasks SET created_at = ?, finished_at = ? WHERE task_id LIKE 'task_old_%'").run(
      old,
      old,
    );
    db.prepare(
      "UPDATE tasks SET finished_at = NULL WHERE task_id IN ('task_old_running', 'task_old_paused')",
    ).run();
    expect(count(db, 'SELECT COUNT(*) FROM task_events')).toBe(600);

    const keep = loadConfig({}).retention;
    const retention = startRetention(
      [
        {
          name: 'tasks',
          batch: 50,
          step: (limit, now) => store.pruneTasks(new Date(now - keep.taskMs).toISOString(), limit),
        },
      ],
      { intervalMs: keep.intervalMs },
    );
    expect(await retention.runOnce()).toEqual({ tasks: 120 });
    await retention.stop();
    expect(db.prepare('SELECT task_id FROM tasks ORDER BY task_id').pluck().all()).toEqual([
      'task_new',
      'task_old_paused',
      'task_old_running',
    ]);
    expect(count(db, 'SELECT COUNT(*) FROM task_events')).toBe(0);
    expect((await store.awaiting()).map((t) => t.task.task_id)).toEqual(['task_old_paused']);
    await store.close();
  });

  it('sweeps once at start and on its timer by itself, and a failing rule does not stop the others', async () => {
    const seen: string[] = [];
    const retention = startRetention(
      [
        {
          name: 'broken',
          step: () => {
            throw new Error('database is locked');
          },
        },
        {
          name: 'ok',
          step: () => {
            seen.push('ok');
            return 0;
          },
        },
      ],
      { intervalMs: 10_000 },
    );
    await vi.waitFor(() => expect(seen).toEqual(['ok']));
    expect(await retention.runOnce()).toEqual({ broken: 0, ok: 0 });
    await retention.stop();
  });

  it('refuses a bad retention setting, naming it', () => {
    expect(() => loadConfig({ AUDIT_RETENTION_DAYS: '-1' })).toThrow(/AUDIT_RETENTION_DAYS/);
    expect(() => loadConfig({ AUDIT_MAX_ROWS: '10' })).toThrow(/AUDIT_MAX_ROWS/);
  });
});

describe('retention in the running services', () => {
  it('prunes at start while all three services answer', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'toolshift-retention-live-'));
    dirs.push(dir);
    const dataDir = path.join(dir, 'data');
    await mkdir(path.join(dir, 'workspace'), { recursive: true });
    await mkdir(dataDir);
    // A data directory as a long-running daemon leaves it: 1,200 audit rows and 60 tasks from 40 days ago.
    const old = new Date(Date.now() - 40 * DAY).toISOString();
    const gdb = openDatabase(path.join(dataDir, 'gateway.db'));
    const gstate = await openGatewayState({ db: gdb });
    const add = gdb.prepare(
      "INSERT INTO audit (at, session_id, kind, subject, ok, actor) VALUES (?, 's', 'call', 't', 1, 'agent')",
    );
    gdb.transaction(() => {
      for (let i = 0; i < 1200; i++) add.run(old);
      add.run(new Date().toISOString());
    })();
    await gstate.close();
    const adb = openDatabase(path.join(dataDir, 'agent.db'));
    const tasks = createTaskStore(adb);
    for (let i = 0; i < 60; i++) await tasks.createTask(`task_${i}`, 's', 'old');
    await tasks.flush();
    adb.prepare("UPDATE tasks SET status = 'completed', created_at = ?, finished_at = ?").run(old, old);
    await tasks.createTask('task_recent', 's', 'recent');
    await tasks.close();

    const env = {
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      TOOLSHIFT_DATA_DIR: dataDir,
      FS_ROOTS: path.join(dir, 'workspace'),
      LOG_LEVEL: 'silent',
    };
    const tools = await startToolServer(loadConfig(env));
    const gateway = await startGateway(loadConfig({ ...env, TOOL_SERVER_URL: tools.url }), {
      backendWaitMs: 5000,
    }).catch(async (err) => {
      await tools.close();
      throw err;
    });
    const agent = await startAgentServer(loadConfig({ ...env, GATEWAY_URL: gateway.url }));
    try {
      const rows = (file: string, sql: string) => {
        const db = openDatabase(path.join(dataDir, file));
        try {
          return count(db, sql);
        } finally {
          db.close();
        }
      };
      await vi.waitFor(
        () => {
          expect(rows('gateway.db', 'SELECT COUNT(*) FROM audit')).toBe(1);
          expect(rows('agent.db', 'SELECT COUNT(*) FROM tasks')).toBe(1);
        },
        { timeout: 10_000 },
      );
      for (const s of [tools, gateway, agent]) expect((await fetch(`${s.url}/health`)).status).toBe(200);
    } finally {
      await agent.close();
      await gateway.close();
      await tools.close();
    }
  });
});

describe('MCP handles and their sessions', () => {
  it('keeps no orphan session after 10,000 handles under a cap of 100, nor after expiry', async () => {
    const db = await tempDb('gateway.db');
    let clock = 1_000_000;
    const state = await openGatewayState({ db });
    const { store } = state;
    const handles = handleStore(state.handles, {
      idleMs: 3_600_000,
      maxPerCredential: 100,
      now: () => clock,
      onDrop: (ids) => store.dropSessions(ids),
    });
    for (let i = 0; i < 10_000; i++) {
      clock += 1;
      const h = await handles.mint('mcp-cred');
      await store.activate(h, ['fs_read', 'fs_write'], []);
    }
    const orphans = () =>
      count(db, 'SELECT COUNT(*) FROM sessions WHERE id NOT IN (SELECT handle FROM mcp_handles)');
    expect(count(db, 'SELECT COUNT(*) FROM mcp_handles')).toBe(100);
    expect(count(db, 'SELECT COUNT(*) FROM sessions')).toBe(100);
    expect(count(db, 'SELECT COUNT(*) FROM session_toolsets')).toBe(200);
    expect(orphans()).toBe(0);

    // Expiry: one handle used after its lifetime, then the rest by the sweep.
    const one = db.prepare('SELECT handle FROM mcp_handles LIMIT 1').pluck().get() as string;
    clock += 3_600_001;
    await expect(handles.use(one, 'mcp-cred')).rejects.toThrow(/expired/);
    expect(count(db, 'SELECT COUNT(*) FROM sessions')).toBe(99);
    expect((await store.load(one)).toolsets).toBeNull();
    expect(await handles.sweep()).toBe(99);
    expect(count(db, 'SELECT COUNT(*) FROM sessions')).toBe(0);
    expect(count(db, 'SELECT COUNT(*) FROM session_toolsets')).toBe(0);
    await state.close();
    // 10,000 mints and activations, each its own commits: a bound on a loaded machine, not a timing.
  }, 120_000);
});
