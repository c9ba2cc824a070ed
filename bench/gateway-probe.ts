import { monitorEventLoopDelay } from 'node:perf_hooks';
import { loadConfig } from '../lib/config/config.ts';
import { startGateway } from '../mcp-gateway/server.ts';

// A gateway replica in a process of its own (bench/gateway-replicas.ts, figure 17), configured by the
// environment it is started with, that reports its event loop's delay (perf_hooks monitorEventLoopDelay, 1 ms
// resolution) when asked over IPC: 'reset' starts a window, 'report' answers its p50, p99 and max (ms), 'stop'
// closes the replica and exits.

const gateway = await startGateway(loadConfig({ ...process.env }), { backendWaitMs: 5000, announce: false });
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
const ms = (ns: number) => Math.round((ns / 1e6) * 100) / 100;
process.on('message', (message: string) => {
  if (message === 'reset') {
    delay.reset();
    process.send?.({ reset: true });
  } else if (message === 'report') {
    process.send?.({ p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max) });
  } else if (message === 'stop') {
    gateway
      .close()
      .catch((err: unknown) => console.error(err))
      .finally(() => process.exit(0));
  }
});
process.send?.({ url: gateway.url });
