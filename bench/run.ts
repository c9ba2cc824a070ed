import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { manageToolsetsTool } from '../agent-server/manage-toolsets.ts';
import { loadConfig } from '../lib/config.ts';
import { startStack } from '../start-stack.ts';
import { benchDiscovery } from './discovery.ts';

// `npm run bench`: what a request's tool definitions cost in tokens, and what the loop adds per step
// on top of the model, over real HTTP between the three services. Prints figures and ratios only.

const enc = new Tiktoken(o200k);
const tokens = (value: unknown) => enc.encode(JSON.stringify(value)).length;

function fakeModel(): Promise<{ url: string; close: () => void; modelMs: () => number }> {
  let busy = 0;
  const reply = (message: Record<string, unknown>) => ({
    id: 'b',
    object: 'chat.completion',
    created: 0,
    model: 'bench',
    choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
  const call = (name: string, args: unknown) =>
    reply({
      tool_calls: [
        { id: `c${Math.random()}`, type: 'function', function: { name, arguments: JSON.stringify(args) } },
      ],
    });
  const server = http.createServer((req, res) => {
    const started = performance.now();
    let body = '';
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      const request = JSON.parse(body) as { messages: { role: string; content: string }[] };
      const done = request.messages.filter((m) => m.role === 'tool').length;
      const goal = request.messages[1].content;
      const script = [
        call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] }),
        call('write_file', { path: `${goal}.txt`, content: 'x'.repeat(1000) }),
        call('read_text_file', { path: `${goal}.txt` }),
        call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['file_system_tools'] }),
        reply({ content: 'done' }),
      ];
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(script[done]));
      busy += performance.now() - started;
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
        close: () => server.close(),
        modelMs: () => busy,
      }),
    ),
  );
}

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const fmt = (n: number) => n.toFixed(2);

async function main() {
  // 1. Tool-definition tokens per request.
  const tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-bench-'));
  await mkdir(path.join(tmp, 'ws'));
  const model = await fakeModel();
  const config = loadConfig({
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    OPENAI_BASE_URL: model.url,
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
    FS_ROOTS: path.join(tmp, 'ws'),
    LOG_LEVEL: 'silent',
  });
  const { tools, gateway, agent } = await startStack(config);

  const fsDefs = (await (await fetch(`${tools.url}/tools`)).json()) as {
    name: string;
    description: string;
    parameters: unknown;
  }[];
  const asFunction = (t: { name: string; description: string; parameters: unknown }) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: t.parameters },
  });
  const github = JSON.parse(
    readFileSync(path.resolve('../shared/data/github-mcp-server-tools.json'), 'utf8'),
  ) as {
    tools: { name: string; description: string; inputSchema: unknown }[];
  };
  const githubDefs = github.tools.map((t) => asFunction({ ...t, parameters: t.inputSchema }));
  const meta = tokens([manageToolsetsTool]);
  const withFs = tokens([manageToolsetsTool, ...fsDefs.map(asFunction)]);
  const everything = tokens([...fsDefs.map(asFunction), ...githubDefs]);
  console.log('tool-definition tokens per request (o200k_base)');
  console.log(`  manage_toolsets only:                         ${meta}`);
  console.log(`  + file_system_tools (${fsDefs.length} tools):                ${withFs}`);
  console.log(`  static list: file tools + ${githubDefs.length} GitHub MCP tools: ${everything}`);
  console.log(
    `  ratio static / meta-only: ${fmt(everything / meta)}x; static / with file tools: ${fmt(everything / withFs)}x`,
  );

  // 2. Loop overhead per step over real HTTP (the model answers instantly).
  const run = async (goal: string) => {
    const started = performance.now();
    const res = await fetch(`${agent.url}/agent/execute_task`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ goal }),
    });
    const body = (await res.json()) as { status: string; steps: number };
    if (body.status !== 'completed') throw new Error(`bench task ended ${body.status}`);
    return { ms: performance.now() - started, steps: body.steps };
  };
  for (let i = 0; i < 5; i++) await run(`warm${i}`);
  const before = model.modelMs();
  const sequential: number[] = [];
  let steps = 0;
  const n = 40;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const r = await run(`seq${i}`);
    sequential.push(r.ms);
    steps += r.steps;
  }
  const seqTotal = performance.now() - t0;
  const perStep = (seqTotal - (model.modelMs() - before)) / steps;
  console.log(
    `\nagent loop, ${n} sequential tasks of ${steps / n} model steps (2 toolset changes, 2 file tools each)`,
  );
  console.log(`  task latency median ${fmt(pct(sequential, 0.5))} ms, p95 ${fmt(pct(sequential, 0.95))} ms`);
  console.log(`  toolshift overhead per model step (excluding the model): ${fmt(perStep)} ms`);

  const concurrency = 8;
  const t1 = performance.now();
  await Promise.all(Array.from({ length: concurrency * 5 }, (_, i) => run(`par${i}`)));
  const parTotal = performance.now() - t1;
  console.log(
    `  ${concurrency * 5} tasks, all at once: ${fmt(parTotal)} ms; throughput ${fmt((concurrency * 5 * 1000) / parTotal)} tasks/s vs ${fmt((n * 1000) / seqTotal)} tasks/s sequential (${fmt((concurrency * 5) / parTotal / (n / seqTotal))}x)`,
  );
  console.log(
    `  resident memory after the runs: ${fmt(process.memoryUsage().rss / 1024 / 1024)} MiB (three services in one process)`,
  );

  await agent.close();
  await gateway.close();
  await tools.close();
  model.close();
  await rm(tmp, { recursive: true, force: true });
}

await main();
await benchDiscovery();
