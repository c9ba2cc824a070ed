import { concurrencyScript } from './concurrency-script.ts';
import { startMockModel } from './mock-model.ts';

// The mock model as its own process (the concurrency run): a fixed latency (and MOCK_CHUNK_GAP_MS between a
// streamed reply's pieces), the concurrency task's script,
// its base URL printed as one JSON line on stdout, arrival times at GET /stats.

const script = concurrencyScript();
const model = await startMockModel({
  latencyMs: Number(process.env.MOCK_LATENCY_MS ?? 1000),
  chunkGapMs: Number(process.env.MOCK_CHUNK_GAP_MS ?? 0),
  script: (_key, turn) => script[turn],
});
process.stdout.write(`${JSON.stringify({ url: model.url })}\n`);
process.on('SIGTERM', () => void model.close().then(() => process.exit(0)));
