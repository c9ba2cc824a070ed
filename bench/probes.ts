import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool, type Tool } from '../tool-server/kit/define.ts';

// Two probe tools for the gateway-hop figures, served by the benchmark's own tool-server beside the native
// tools: an echo (an answer as small as a tool's can be) and a tool that takes a fixed 20 ms.

/** The probes' toolset file. */
export const PROBE_TOOLSET = `id: bench_probes
description: Benchmark probes, an echo and a fixed 20 ms delay.
backend: tool-server
tools: [bench_echo, bench_delay]
`;

/** The fixed delay of bench_delay. */
export const PROBE_DELAY_MS = 20;

/** The probe tools. */
export const probeTools: readonly Tool[] = [
  defineTool({
    name: 'bench_echo',
    description: 'Returns its text unchanged.',
    input: z.object({ text: z.string() }),
    output: z.object({ text: z.string() }),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    execute: async ({ text }) => ({ text }),
  }),
  defineTool({
    name: 'bench_delay',
    description: `Waits ${PROBE_DELAY_MS} ms, then returns its text.`,
    input: z.object({ text: z.string() }),
    output: z.object({ text: z.string() }),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    execute: async ({ text }) => {
      await sleep(PROBE_DELAY_MS);
      return { text };
    },
  }),
];
