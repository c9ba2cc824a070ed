import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { HttpResponse, http } from 'msw';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openAIModel } from '../../../agent-server/clients/model.ts';
import { createPromptCatalog, loadPlaybooks } from '../../../mcp-gateway/catalog/prompts.ts';
import { completion, MODEL_BASE_URL, modelEdge } from '../../helpers/msw.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

const edge = modelEdge();
afterAll(() => edge.close());

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const GREETING = `name: greet
description: Greets someone.
arguments:
  - name: who
    description: Whom to greet.
    required: true
  - name: mood
    description: How.
template: |
  Hello {{who}}!{{#if mood}} You seem {{mood}}.{{else}} How are you?{{/if}}
`;

async function promptsDir(files: Record<string, string>) {
  const dir = await mkdtemp(path.join(tmpdir(), 'prompts-'));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  return dir;
}

describe('playbook prompts', () => {
  it('renders variables and conditionals, and never evaluates or HTML-escapes argument values', async () => {
    const catalog = createPromptCatalog(await promptsDir({ 'greet.yaml': GREETING }));
    expect(catalog.render('greet', { who: 'Ann' }).text).toBe('Hello Ann! How are you?');
    expect(catalog.render('greet', { who: 'Ann', mood: 'cheerful' }).text).toBe(
      'Hello Ann! You seem cheerful.',
    );
    const tricky = catalog.render('greet', { who: '{{mood}} <b>&</b> {{#if x}}y{{/if}}' }).text;
    expect(tricky).toBe('Hello {{mood}} <b>&</b> {{#if x}}y{{/if}}! How are you?');
  });

  it('refuses missing, unknown and non-string arguments, and unknown prompts, saying what is valid', async () => {
    const catalog = createPromptCatalog(await promptsDir({ 'greet.yaml': GREETING }));
    expect(() => catalog.render('greet', {})).toThrow('Missing required argument(s) for greet: who');
    expect(() => catalog.render('greet', { who: 'a', shout: 'yes' })).toThrow(
      'Unknown argument(s) for greet: shout; it takes: who, mood',
    );
    expect(() => catalog.render('greet', { who: 3 })).toThrow('Argument who of greet must be a string');
    expect(() => catalog.render('grete', {})).toThrow('Unknown prompt grete; prompts: greet');
  });

  it('skips a file whose template uses an undeclared argument, or that has unknown keys, naming the file; the others load', async () => {
    const bad = await promptsDir({
      'bad.yaml': GREETING.replace('{{who}}', '{{whom}}'),
      'extra.yaml': `${GREETING}model: gpt-5\n`,
      'good.yaml': GREETING.replace('name: greet', 'name: hello'),
    });
    const loaded = loadPlaybooks(bad);
    expect([...loaded.playbooks.keys()]).toEqual(['hello']);
    expect(loaded.warnings).toEqual([
      expect.stringMatching(
        /bad\.yaml: the template does not render with the declared arguments \(who, mood\).*\(this file is skipped; the other prompts load\)$/,
      ),
      expect.stringMatching(/extra\.yaml: .*Unrecognized key: "model"/),
    ]);
  });

  it('loads the shipped playbooks', () => {
    const names = createPromptCatalog(path.resolve('prompts'))
      .list()
      .map((p) => p.name);
    expect(names).toEqual(['review-diff', 'summarize-directory', 'triage-failing-test']);
  });

  it('serves prompts over REST and on the MCP face in both eras', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      promptsDir: await promptsDir({ 'greet.yaml': GREETING }),
    });
    const s = stack;
    const listed = await s.get(s.gatewayApp, '/mcp/prompts');
    expect(listed.body.prompts[0]).toMatchObject({
      name: 'greet',
      arguments: [
        { name: 'who', required: true },
        { name: 'mood', required: false },
      ],
    });
    const rendered = await s.post(s.gatewayApp, '/mcp/prompts/greet/render', { arguments: { who: 'Bo' } });
    expect(rendered.body.text).toBe('Hello Bo! How are you?');
    expect((await s.post(s.gatewayApp, '/mcp/prompts/greet/render', { arguments: {} })).status).toBe(400);
    expect((await s.post(s.gatewayApp, '/mcp/prompts/nope/render', { arguments: {} })).status).toBe(404);

    for (const era of ['modern', 'legacy'] as const) {
      const client = new Client(
        { name: 't', version: '1' },
        era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {},
      );
      await client.connect(
        new StreamableHTTPClientTransport(new URL('http://127.0.0.1/mcp'), {
          fetch: async (url, init) => s.gatewayApp.request(String(url), init),
        }),
      );
      expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(['greet']);
      const got = await client.getPrompt({ name: 'greet', arguments: { who: 'Cy', mood: 'tired' } });
      expect(got.messages[0].content).toEqual({ type: 'text', text: 'Hello Cy! You seem tired.' });
      await expect(client.getPrompt({ name: 'greet', arguments: {} })).rejects.toThrow(
        /Missing required argument/,
      );
      await client.close();
    }
  });

  it('runs a task from a playbook, the model mocked at the OpenAI edge', async () => {
    const seen: { messages: { role: string; content: string }[] }[] = [];
    edge.use(
      http.post(`${MODEL_BASE_URL}/chat/completions`, async ({ request }) => {
        seen.push((await request.json()) as (typeof seen)[number]);
        return HttpResponse.json(completion({ content: 'Greeted.' }));
      }),
    );
    const model = openAIModel({ baseURL: MODEL_BASE_URL, apiKey: 'k', timeoutMs: 5000, maxAttempts: 1 });
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      model,
      promptsDir: await promptsDir({ 'greet.yaml': GREETING }),
    });
    const s = stack;
    const res = await s.post(s.agentApp, '/agent/execute_task', {
      prompt: { name: 'greet', arguments: { who: 'Dee' } },
    });
    expect(res.body).toMatchObject({ status: 'completed', final_answer: 'Greeted.' });
    expect(seen[0].messages[1]).toEqual({ role: 'user', content: 'Hello Dee! How are you?' });
    expect((await s.get(s.agentApp, `/agent/tasks/${res.body.task_id}`)).body.goal).toBe(
      'Hello Dee! How are you?',
    );
    const missing = await s.post(s.agentApp, '/agent/execute_task', {
      prompt: { name: 'greet', arguments: {} },
    });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('Missing required argument(s) for greet: who');
    const both = await s.post(s.agentApp, '/agent/execute_task', { goal: 'x', prompt: { name: 'greet' } });
    expect(both.status).toBe(400);
    expect(both.body.error).toMatch(/give exactly one of goal .* and prompt/);
    expect(seen).toHaveLength(1);
  });
});
