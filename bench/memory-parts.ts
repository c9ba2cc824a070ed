import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

// Where `npm start`'s resident memory goes, measured in a process of its own (run with --expose-gc on Node's
// type stripping, as npm start runs): resident memory and V8 heap after each stage of starting the services. With
// `one` (TOOLSHIFT_THREADS=1): Node alone, the services' modules loaded, the tokenizer's
// rank table loaded, the three services listening. With `two` (npm start on more than one core): Node with the
// the agent-server's modules and the tokenizer, the gateway and the tool-server listening on a worker
// thread, the agent-server listening. A full collection of the main thread's heap runs before each reading (a
// worker thread's heap is left to itself, as in npm start). Prints one JSON line.

/** One reading. */
export interface MemoryStage {
  stage: string;
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

function reading(stage: string): MemoryStage {
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  return { stage, rss: m.rss, heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers };
}

async function main(layout: 'one' | 'two') {
  const stages: MemoryStage[] = [reading('node (type stripping, no loader)')];
  const dir = await mkdtemp(path.join(tmpdir(), 'toolshift-memory-'));
  await mkdir(path.join(dir, 'ws'));
  const { loadConfig } = await import('../lib/config/config.ts');
  const config = loadConfig({
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
    TOOLSHIFT_DATA_DIR: path.join(dir, 'data'),
    FS_ROOTS: path.join(dir, 'ws'),
    LOG_LEVEL: 'silent',
  });
  const tokens = await import('../lib/telemetry/tokens.ts');
  let close: () => Promise<void>;
  if (layout === 'one') {
    const { startStack } = await import('../start/stack.ts');
    stages.push(reading('services’ modules loaded'));
    tokens.createTokenCounter('o200k_base').text('load the rank table');
    stages.push(reading('tokenizer (o200k_base) loaded'));
    const { tools, gateway, agent } = await startStack(config);
    stages.push(reading('three services listening'));
    close = async () => {
      await agent.close();
      await gateway.close();
      await tools.close();
    };
  } else {
    const { startAgentServer } = await import('../agent-server/server.ts');
    const { startServiceThread } = await import('../start/threads.ts');
    stages.push(reading('agent-server’s modules loaded'));
    tokens.createTokenCounter('o200k_base').text('load the rank table');
    stages.push(reading('tokenizer (o200k_base) loaded'));
    const { gateway } = await startServiceThread(config);
    // As npm start's idle reading: the thread's start-up garbage is left to its own collector for a while.
    await new Promise((r) => setTimeout(r, Number(process.env.SETTLE_MS ?? 2000)));
    stages.push(reading('gateway and tool-server listening on a second thread'));
    const agent = await startAgentServer({ ...config, gateway: { ...config.gateway, url: gateway.url } });
    stages.push(reading('agent-server listening'));
    close = async () => {
      await agent.close();
      await gateway.close();
    };
  }
  await close();
  await rm(dir, { recursive: true, force: true });
  process.stdout.write(`${JSON.stringify({ stages })}\n`);
  process.exit(0);
}

await main(process.argv[2] === 'two' ? 'two' : 'one');
