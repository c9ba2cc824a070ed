import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { delay, HttpResponse, http } from 'msw';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startStack } from '../../start/stack.ts';
import { completion, MODEL_BASE_URL, modelEdge } from '../helpers/msw.ts';
import { readSse } from '../helpers/sse.ts';
import { testDatabaseFor } from '../helpers/stack.ts';

// The three services as `npm start` runs them: linked in-process (start/stack.ts), and in the `postgres` project
// (TOOLSHIFT_TEST_LINK=http) on loopback with real HTTP between them; only the model is mocked, at its HTTP edge.

const LINK = process.env.TOOLSHIFT_TEST_LINK === 'http' ? 'http' : 'in-process';

const server = modelEdge();
let tmp: string;
let services: Listening[] = [];
let agentUrl: string;
let gatewayUrl: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-e2e-'));
  await mkdir(path.join(tmp, 'workspace'));
  const config = loadConfig({
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    OPENAI_BASE_URL: MODEL_BASE_URL,
    OPENAI_API_KEY: 'test-key',
    // The `postgres` project runs this file again with the tasks and the gateway's state in PostgreSQL.
    DATABASE_URL: await testDatabaseFor(tmp),
    AGENT_MODEL: 'e2e-model',
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
    FS_ROOTS: path.join(tmp, 'workspace'),
    LOG_LEVEL: 'silent',
    // The scripted model activates what it needs itself (goal priming has tests of its own).
    AGENT_PRIME_TOOLSETS: 'false',
  });
  const { tools, gateway, agent } = await startStack(config, { link: LINK });
  services = [agent, gateway, tools];
  agentUrl = agent.url;
  gatewayUrl = gateway.url;
});

afterAll(async () => {
  server.close();
  for (const s of services) await s.close();
  await rm(tmp, { recursive: true, force: true });
});

interface SeenRequest {
  model: string;
  tools: { function: { name: string } }[];
  messages: { role: string; content: string | null; tool_call_id?: string }[];
}

function toolCall(id: string, name: string, args: unknown) {
  return completion({
    tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
  });
}

describe(`end to end (${LINK})`, () => {
  it('activates file_system_tools, writes a file, deactivates the toolset and answers', async () => {
    const seen: SeenRequest[] = [];
    const replies = [
      toolCall('call_a', 'manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] }),
      toolCall('call_w', 'write_file', { path: 'report/summary.md', content: '# Summary\nAll good.\n' }),
      toolCall('call_d', 'manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['file_system_tools'] }),
      completion({ content: 'I wrote report/summary.md.' }),
    ];
    server.use(
      http.post(`${MODEL_BASE_URL}/chat/completions`, async ({ request }) => {
        seen.push((await request.json()) as SeenRequest);
        return HttpResponse.json(replies[seen.length - 1]);
      }),
    );
    const res = await fetch(`${agentUrl}/agent/execute_task`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ goal: 'Write a summary file' }),
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({
      status: 'completed',
      final_answer: 'I wrote report/summary.md.',
      steps: 4,
      toolsets_used: ['file_system_tools'],
      usage: { prompt_tokens: 400, completion_tokens: 40, total_tokens: 440 },
    });

    const names = seen.map((r) => r.tools.map((t) => t.function.name));
    expect(names[0]).toEqual(['manage_toolsets']);
    expect(names[1][0]).toBe('manage_toolsets');
    const fsTools = (parse(readFileSync('toolsets/file_system_tools.yaml', 'utf8')) as { tools: string[] })
      .tools;
    expect(names[1]).toEqual(['manage_toolsets', ...fsTools]);
    expect(names[1]).toContain('write_file');
    expect(names[2]).toEqual(names[1]);
    expect(names[3]).toEqual(['manage_toolsets']);
    expect(seen.every((r) => r.model === 'e2e-model')).toBe(true);

    const writeResult = seen[2].messages.find((m) => m.tool_call_id === 'call_w');
    expect(JSON.parse(String(writeResult?.content))).toMatchObject({ size_bytes: 20 });
    const written = await readFile(path.join(tmp, 'workspace/report/summary.md'), 'utf8');
    expect(written).toBe('# Summary\nAll good.\n');

    // The session is left with nothing active, and the task is on record.
    const toolsets = await (
      await fetch(`${gatewayUrl}/mcp/admin/toolsets?session_id=${body.session_id}`)
    ).json();
    expect(toolsets.toolsets.every((t: { active: boolean }) => !t.active)).toBe(true);
    const task = await (await fetch(`${agentUrl}/agent/tasks/${body.task_id}`)).json();
    expect(task.status).toBe('completed');
    // Linked in-process, the task's calls reached the gateway without a request; over HTTP, each was one.
    const metrics = await (await fetch(`${gatewayUrl}/metrics`)).text();
    const calls = /http_requests_total\{[^}]*route="\/mcp\/tools\/:name\/call"[^}]*\} (\d+)/.exec(metrics);
    const manage = /http_requests_total\{[^}]*route="\/mcp\/manage_toolsets"[^}]*\} (\d+)/.exec(metrics);
    if (LINK === 'http') {
      expect(Number(calls?.[1])).toBeGreaterThanOrEqual(1);
      expect(Number(manage?.[1])).toBeGreaterThanOrEqual(2);
    } else {
      expect(calls).toBeNull();
      expect(manage).toBeNull();
    }
  });

  it('submits a task asynchronously, follows its events, and cancels it during a slow model call', async () => {
    let calls = 0;
    let aborted = false;
    server.use(
      http.post(`${MODEL_BASE_URL}/chat/completions`, async ({ request }) => {
        calls++;
        request.signal.addEventListener('abort', () => {
          aborted = true;
        });
        await delay('infinite');
        return HttpResponse.json(completion({ content: 'never' }));
      }),
    );
    const submitted = await fetch(`${agentUrl}/agent/execute_task`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', prefer: 'respond-async' },
      body: JSON.stringify({ goal: 'think slowly' }),
    });
    expect(submitted.status).toBe(202);
    const { task_id: id } = await submitted.json();
    const events = readSse(await fetch(`${agentUrl}/agent/tasks/${id}/events`));
    await events.until('model_request');
    const cancelled = await fetch(`${agentUrl}/agent/tasks/${id}/cancel`, { method: 'POST' });
    expect(await cancelled.json()).toMatchObject({ status: 'cancelled' });
    const result = await events.until('result');
    expect(JSON.parse(result?.data ?? '{}')).toMatchObject({ status: 'cancelled', steps: 0 });
    expect(calls).toBe(1);
    expect(aborted).toBe(true);
  });

  it('serves /health and /openapi.json on every service', async () => {
    for (const s of services) {
      expect((await (await fetch(`${s.url}/health`)).json()).status).toBe('ok');
      const doc = await (await fetch(`${s.url}/openapi.json`)).json();
      expect(doc.openapi).toBe('3.1.0');
      expect(Object.keys(doc.paths).length).toBeGreaterThan(1);
    }
  });
});
