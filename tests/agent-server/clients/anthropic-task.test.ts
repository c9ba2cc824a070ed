import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { modelFor } from '../../../agent-server/clients/providers.ts';
import { summary } from '../../../cli/render.ts';
import { createStyle } from '../../../cli/style.ts';
import { loadConfig } from '../../../lib/config/config.ts';
import { ANTHROPIC_BASE_URL, breakpoints, scriptAnthropic, text, toolUse } from '../../helpers/anthropic.ts';
import { modelEdge } from '../../helpers/msw.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// A task end to end with AGENT_PROVIDER=anthropic: the agent-server's loop, the gateway and the tool-server
// in-process, the model a scripted Messages endpoint at the HTTP edge that checks every request.

const server = modelEdge();
let stack: Stack | undefined;
afterEach(async () => {
  server.resetHandlers();
  await stack?.close();
  stack = undefined;
});
afterAll(() => server.close());

describe('a task over the Anthropic provider', () => {
  it('completes with tool calls, keeps the cached prefix, and its summary counts the cached tokens', async () => {
    const config = loadConfig({
      AGENT_PROVIDER: 'anthropic',
      ANTHROPIC_BASE_URL,
      ANTHROPIC_API_KEY: 'sk-ant-test',
      AGENT_MODEL_STREAM: 'true',
    });
    const m = config.agent.model;
    expect(m).toMatchObject({
      provider: 'anthropic',
      name: 'claude-sonnet-4-5',
      baseURL: ANTHROPIC_BASE_URL,
    });
    const model = modelFor({ ...m, sleep: async () => {} });
    const edge = scriptAnthropic(server, [
      toolUse(
        'toolu_1',
        'manage_toolsets',
        { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
        {
          input_tokens: 800,
          output_tokens: 20,
          cache_creation_input_tokens: 1200,
        },
      ),
      toolUse(
        'toolu_2',
        'call_tool',
        { name: 'write_file', arguments: { path: 'n/x.txt', content: 'hi\n' } },
        {
          input_tokens: 150,
          output_tokens: 30,
          cache_read_input_tokens: 1200,
          cache_creation_input_tokens: 800,
        },
      ),
      text('Written.', { input_tokens: 120, output_tokens: 5, cache_read_input_tokens: 2000 }),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await stack.post(stack.agentApp, '/agent/execute_task', {
      goal: 'write hi to n/x.txt',
      exposure: 'dispatch',
    });
    expect(edge.invalid).toEqual([]);
    expect(res.body).toMatchObject({
      status: 'completed',
      final_answer: 'Written.',
      steps: 3,
      usage: {
        prompt_tokens: 800 + 1200 + 150 + 1200 + 800 + 120 + 2000,
        completion_tokens: 55,
        cached_tokens: 3200,
        cache_write_tokens: 2000,
      },
    });
    expect(await readFile(path.join(stack.root, 'n/x.txt'), 'utf8')).toBe('hi\n');
    // Dispatch keeps the tools fixed: each request's breakpoints sit after the tools, the system prompt and the
    // conversation's last two user turns, the second of which the next request reads back.
    expect(new Set(edge.requests.map((r) => JSON.stringify(r.tools))).size).toBe(1);
    for (const r of edge.requests) {
      const marks = breakpoints(r);
      expect(marks.slice(0, 2)).toEqual(['tools.1', 'system.0']);
      expect(marks.length).toBeLessThanOrEqual(4);
    }
    expect(edge.requests[2]?.messages.at(-1)?.content).toMatchObject([
      { type: 'tool_result', tool_use_id: 'toolu_2' },
    ]);
    // The task's record and the CLI's summary say what came from the cache.
    const stored = await stack.get(stack.agentApp, `/agent/tasks/${res.body.task_id}`);
    expect(stored.body.usage).toMatchObject({ cached_tokens: 3200, cache_write_tokens: 2000 });
    expect(summary(res.body, createStyle(false))).toContain(
      '(prompt 6,270, cached 3,200, cache written 2,000, completion 55)',
    );
    expect(model.health?.()).toMatchObject({ provider: 'anthropic', state: 'ok', url: ANTHROPIC_BASE_URL });
  });
});
