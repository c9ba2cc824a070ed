import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelRequest } from '../../agent-server/clients/model.ts';
import { answer, ScriptedModel } from '../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../helpers/stack.ts';

// The text a model and an MCP client read, kept under tests/system/__toolsnaps__ and reviewed like code: every native
// tool's definition as the tool-server lists it, the first request of a task on the shipped toolsets (system
// prompt and tools, in both exposures), and tools/list on both legs of the MCP face. A change to a
// description or a schema fails here until the snapshots are updated with `npm run snapshots`.

const DIR = `${import.meta.dirname}/__toolsnaps__`;
const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

let stack: Stack;
let model: ScriptedModel;
beforeAll(async () => {
  model = new ScriptedModel([answer('native'), answer('dispatch')]);
  stack = await makeStack({ model });
});
afterAll(() => stack.close());

/** What the task's model was sent first, with the run's temporary directory written as <workspace>. */
function firstRequest(request: ModelRequest) {
  const text = JSON.stringify(request).replaceAll(stack.root, '<workspace>');
  return JSON.parse(text) as ModelRequest;
}

describe('snapshots of what models and clients read', () => {
  it('every native tool’s definition', async () => {
    const res = await stack.toolApp.request('/tools');
    const definitions = (await res.json()) as { name: string }[];
    expect(definitions.length).toBeGreaterThan(20);
    for (const d of definitions) await expect(json(d)).toMatchFileSnapshot(`${DIR}/native/${d.name}.json`);
  });

  it('a task’s first request on the shipped toolsets, native and dispatch', async () => {
    for (const exposure of ['native', 'dispatch'] as const) {
      const res = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'hello', exposure });
      expect(res.status).toBe(200);
    }
    for (const [i, exposure] of ['native', 'dispatch'].entries()) {
      const request = firstRequest(model.requests[i]);
      const system = request.messages[0] as { content: string };
      await expect(`${system.content}\n`).toMatchFileSnapshot(`${DIR}/model/system-prompt.${exposure}.txt`);
      await expect(json(request.tools)).toMatchFileSnapshot(`${DIR}/model/tools.${exposure}.json`);
    }
  });

  it('tools/list on both legs of the MCP face', async () => {
    for (const era of ['modern', 'legacy'] as const) {
      const client = new Client(
        { name: 'snapshots', version: '1.0.0' },
        era === 'modern'
          ? { versionNegotiation: { mode: { pin: '2026-07-28' } } }
          : { supportedProtocolVersions: ['2025-11-25'] },
      );
      await client.connect(
        new StreamableHTTPClientTransport(new URL('http://127.0.0.1/mcp'), {
          fetch: async (url, init) => stack.gatewayApp.request(String(url), init),
        }),
      );
      try {
        const { tools } = await client.listTools();
        await expect(json(tools)).toMatchFileSnapshot(`${DIR}/mcp/tools.${era}.json`);
      } finally {
        await client.close();
      }
    }
  });
});
