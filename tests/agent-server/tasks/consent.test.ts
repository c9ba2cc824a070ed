import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ExecuteTaskResponse, PendingConsent, TaskEvent } from '../../../agent-server/contract.ts';
import { createConsentWatch } from '../../../agent-server/tasks/consent-wait.ts';
import { waitingMessage } from '../../../agent-server/webhooks/message.ts';
import { ServiceError } from '../../../lib/http/http-client.ts';
import { answer, call, calls, ScriptedModel, type Step } from '../../helpers/scripted-model.ts';
import { log, makeStack, type Stack } from '../../helpers/stack.ts';

// A task whose call the gateway refuses until its owner connects their own account (consent_required) waits
// paused (awaiting_consent) and makes the call again once they have: the model sees only the real result. The
// gateway's refusal and its connectionFor answer are played here in front of the real gateway.

const OWNER = 'user:dan';
const LINK = 'http://console.test/console/connect/file_system_tools';

const stacks: Stack[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const s of stacks.splice(0)) await s.close();
});

/** The gateway as a person's account makes it: their calls refused until `connected`, and asked about. */
function accountGate() {
  const gate = { connected: false, asked: 0 };
  const intercept = async (request: Request, next: () => Promise<Response>) => {
    const url = new URL(request.url);
    if (url.pathname === '/mcp/connections/file_system_tools') {
      gate.asked++;
      expect(url.searchParams.get('for_user')).toBe(OWNER);
      const missing = gate.connected ? [] : ['FS_TOKEN'];
      return Response.json({ toolset: 'file_system_tools', connected: gate.connected, missing });
    }
    if (
      url.pathname.startsWith('/mcp/tools/') &&
      request.headers.get('x-toolshift-owner') &&
      !gate.connected
    ) {
      return Response.json(
        {
          error: 'file_system_tools needs your own FS_TOKEN',
          code: 'consent_required',
          toolset: 'file_system_tools',
          connect_url: LINK,
        },
        { status: 409 },
      );
    }
    return next();
  };
  return { gate, intercept };
}

/** A model that activates the file tools, calls one, and answers with what it returned. */
const lister = (): Step[] => [
  calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
  calls(call('list_allowed_directories', {}, 'call_list')),
  (req) => answer(`tool said: ${String(req.messages.at(-1)?.content).slice(0, 300)}`),
];

/** Starts a task of dan's; its id once it started, and its end. */
async function startOwned(s: Stack, goal: string) {
  const events: TaskEvent[] = [];
  const done = s.agent
    .execute({ goal }, (e) => events.push(e), { owner: OWNER, all: false })
    .catch((err: unknown) => ({ status: 'failed', error: String(err) }) as ExecuteTaskResponse);
  await expect.poll(() => events.length).toBeGreaterThan(0);
  return { taskId: String(events[0].data.task_id), done, events };
}

async function until(s: Stack, taskId: string, status: string) {
  await expect
    .poll(async () => (await s.get(s.agentApp, `/agent/tasks/${taskId}`)).body.status, { timeout: 5000 })
    .toBe(status);
  return (await s.get(s.agentApp, `/agent/tasks/${taskId}`)).body;
}

describe('a task waiting for its owner’s consent', () => {
  it('pauses with the link, and makes the refused call again once the owner connects', async () => {
    const { gate, intercept } = accountGate();
    const model = new ScriptedModel(lister());
    const s = await makeStack({ model, interceptGateway: intercept });
    stacks.push(s);
    const { taskId, done } = await startOwned(s, 'list my directories');
    const paused = await until(s, taskId, 'awaiting_consent');
    expect(paused.events.find((e: TaskEvent) => e.type === 'consent_required').data).toEqual({
      step: 2,
      tool_call_id: 'call_list',
      toolset: 'file_system_tools',
      connect_url: LINK,
    });
    // Counted and listed as waiting, not as an approval.
    expect((await s.get(s.agentApp, '/agent/approvals')).body.approvals).toEqual([]);
    await expect.poll(() => gate.asked).toBeGreaterThan(1);
    expect(model.requests).toHaveLength(2);
    gate.connected = true;
    const result = await done;
    expect(result).toMatchObject({ status: 'completed', steps: 3 });
    expect(result.final_answer).toContain(s.root);
    // The model saw the call's real result, nothing of the wait.
    const told = JSON.stringify(model.requests[2].messages);
    expect(told).not.toMatch(/consent|FS_TOKEN/);
  });

  it('goes on waiting after a restart, and resumes there once the owner connects', async () => {
    const { gate, intercept } = accountGate();
    const first = await makeStack({
      model: new ScriptedModel(lister().slice(0, 2)),
      interceptGateway: intercept,
    });
    const { taskId } = await startOwned(first, 'list after a restart');
    await until(first, taskId, 'awaiting_consent');
    await first.close(true);
    const model = new ScriptedModel(lister().slice(2));
    const second = await makeStack({ dataDir: first.dataDir, model, interceptGateway: intercept });
    stacks.push(second);
    const asked = gate.asked;
    await expect.poll(() => gate.asked).toBeGreaterThan(asked);
    expect((await second.get(second.agentApp, `/agent/tasks/${taskId}`)).body.status).toBe(
      'awaiting_consent',
    );
    gate.connected = true;
    const ended = await until(second, taskId, 'completed');
    expect(ended.final_answer).toMatch(/^tool said: /);
    expect(model.requests[0].messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_list' });
  });

  it('fails once CONSENT_TIMEOUT_S passes, saying the person did not connect in time', async () => {
    const { intercept } = accountGate();
    const s = await makeStack({
      model: new ScriptedModel(lister()),
      interceptGateway: intercept,
      consentTimeoutS: 1,
    });
    stacks.push(s);
    const { done } = await startOwned(s, 'never connected');
    const result = await done;
    expect(result.status).toBe('failed');
    expect(result.error).toMatch(
      /^Task failed: the person \(user:dan\) did not connect their own account for toolset file_system_tools before .* \(CONSENT_TIMEOUT_S\); they connect it at http:\/\/console\.test/,
    );
  });

  it('is cancelled while it waits', async () => {
    const { intercept } = accountGate();
    const s = await makeStack({ model: new ScriptedModel(lister()), interceptGateway: intercept });
    stacks.push(s);
    const { taskId, done } = await startOwned(s, 'cancel me');
    await until(s, taskId, 'awaiting_consent');
    expect((await s.post(s.agentApp, `/agent/tasks/${taskId}/cancel`, {})).status).toBe(200);
    expect((await done).status).toBe('cancelled');
    await until(s, taskId, 'cancelled');
  });
});

const pending = (taskId: string, owner = OWNER, expiresInMs = 60_000): PendingConsent => ({
  task_id: taskId,
  call_id: `call_${taskId}`,
  kind: 'consent',
  toolset: 'keyed',
  connect_url: null,
  owner,
  step: 1,
  expires_at: new Date(Date.now() + expiresInMs).toISOString(),
});

describe('the consent watch', () => {
  it('asks once a round for each owner and toolset, however many tasks wait for it', async () => {
    const asked: string[] = [];
    const given = new Set<string>();
    const watch = createConsentWatch({
      connected: async (toolset, owner) => {
        asked.push(`${owner} ${toolset}`);
        return given.has(owner);
      },
      pollMs: 10,
      log,
    });
    const stop = new AbortController();
    const dan = [watch.wait(pending('a'), stop.signal), watch.wait(pending('b'), stop.signal)];
    const eve = watch.wait(pending('c', 'user:eve'), stop.signal);
    await expect.poll(() => asked.length).toBeGreaterThan(4);
    expect(new Set(asked)).toEqual(new Set(['user:dan keyed', 'user:eve keyed']));
    given.add('user:dan');
    expect(await Promise.all(dan)).toEqual([{ approved: true }, { approved: true }]);
    expect(watch.size()).toBe(1);
    stop.abort();
    await expect(eve).rejects.toThrow();
    expect(watch.size()).toBe(0);
  });

  it('backs off while the gateway cannot be reached, and ends a wait whose toolset is gone', async () => {
    vi.useFakeTimers();
    let asks = 0;
    let gone = false;
    const watch = createConsentWatch({
      connected: async () => {
        asks++;
        if (gone) throw new ServiceError(404, 'No toolset keyed', {});
        throw new Error('connect ECONNREFUSED');
      },
      pollMs: 100,
      maxBackoffMs: 800,
      log,
    });
    const waiting = watch.wait(pending('a'), new AbortController().signal);
    await vi.advanceTimersByTimeAsync(0);
    expect(asks).toBe(1);
    // Pauses of 200, 400, 800, 800 ms: four more asks in 2.2 s instead of twenty-two.
    await vi.advanceTimersByTimeAsync(2200);
    expect(asks).toBe(5);
    gone = true;
    await vi.advanceTimersByTimeAsync(800);
    expect(await waiting).toEqual({ approved: false, fail: 'Task failed: No toolset keyed' });
  });
});

describe('the webhook of a task waiting for a consent', () => {
  it('POSTs task.waiting with the toolset and the link, not an approval', () => {
    const waiting = { ...pending('t1'), connect_url: LINK };
    const sent = waitingMessage({ taskId: 't1', webhook: { url: 'https://hooks.test/x' } }, waiting, 2);
    expect(sent).toMatchObject({ kind: 'task.waiting', key: 'consent:call_t1' });
    expect(JSON.parse(String(sent?.payload))).toMatchObject({
      type: 'task.waiting',
      data: {
        task_id: 't1',
        status: 'awaiting_consent',
        steps: 2,
        pending_approval: null,
        pending_consent: {
          call_id: 'call_t1',
          toolset: 'keyed',
          connect_url: LINK,
          expires_at: waiting.expires_at,
        },
      },
    });
  });
});
