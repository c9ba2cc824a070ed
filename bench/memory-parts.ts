import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { getHeapStatistics } from 'node:v8';

// Where `npm start`'s resident memory goes, measured in a process of its own (run with --expose-gc and the
// tsx loader, as npm start runs): resident memory and V8 heap after each stage of starting the services —
// Node with the TypeScript loader, the services' modules loaded, the tokenizer's rank table loaded, the three
// services listening. A full collection runs before each reading. Prints one JSON line.

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

async function main() {
  const stages: MemoryStage[] = [reading('node with the TypeScript loader')];
  const { loadConfig } = await import('../lib/config.ts');
  const { startStack } = await import('../start-stack.ts');
  const tokens = await import('../lib/tokens.ts');
  stages.push(reading('services’ modules loaded'));
  tokens.createTokenCounter('o200k_base').text('load the rank table');
  stages.push(reading('tokenizer (o200k_base) loaded'));
  const dir = await mkdtemp(path.join(tmpdir(), 'toolshift-memory-'));
  await mkdir(path.join(dir, 'ws'));
  const config = loadConfig({
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
    TOOLSHIFT_DATA_DIR: path.join(dir, 'data'),
    FS_ROOTS: path.join(dir, 'ws'),
    LOG_LEVEL: 'silent',
  });
  const { tools, gateway, agent } = await startStack(config);
  stages.push(reading('three services listening'));
  const heap = getHeapStatistics();
  await agent.close();
  await gateway.close();
  await tools.close();
  await rm(dir, { recursive: true, force: true });
  process.stdout.write(
    `${JSON.stringify({ stages, heapLimit: heap.heap_size_limit, mallocedMemory: heap.malloced_memory })}\n`,
  );
  process.exit(0);
}

await main();
