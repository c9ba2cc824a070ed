import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createGatewayClient } from '../agent-server/clients/gateway.ts';
import { toolServerBackend } from '../mcp-gateway/backends/tool-server-backend.ts';
import { goalMarker, type ScriptedTurn, startMockModel } from './mock-model.ts';
import { PROBE_DELAY_MS, PROBE_TOOLSET, probeTools } from './probes.ts';
import { startBenchStack } from './stack.ts';
import { bareRoundTrip, interleaved, percentile, postFast, startBareServer } from './timing.ts';

// Figures 6–8 on one stack with the probe tools: the gateway hop (agent's client → gateway → tool-server
// against a direct call to the tool-server), toolshift's own time per model step, and the toggle cost (a
// manage_toolsets round trip against a plain tool call on the same path). Each is scaled by a bare loopback
// HTTP round trip measured in the same run, interleaved with the probes it scales.

/** Median times of one probe set, in ms. */
export interface LatencyRun {
  bareRtt: number;
  echo: { direct: number; viaGateway: number };
  delay: { direct: number; viaGateway: number };
  toggle: { manage: number; call: number };
  step: { ownMsPerStep: number; steps: number; tasks: number; bareRtt: number };
  rounds: number;
}

const ECHO_TURNS = 6;

/** The step-time task: activate the probes, six echo calls (deactivating with the last), answer. */
export function stepScript(): ScriptedTurn[] {
  const turns: ScriptedTurn[] = [
    {
      calls: [
        {
          id: 'c0',
          name: 'manage_toolsets',
          arguments: { action: 'ACTIVATE', toolset_ids: ['bench_probes'] },
        },
      ],
    },
  ];
  for (let i = 1; i <= ECHO_TURNS; i++) {
    const calls = [
      { id: `c${i}`, name: 'bench_echo', arguments: { text: `step ${i}: the quick brown fox` } },
    ];
    if (i === ECHO_TURNS)
      calls.push({
        id: 'cd',
        name: 'manage_toolsets',
        arguments: { action: 'DEACTIVATE', toolset_ids: ['bench_probes'] },
      } as never);
    turns.push({ calls });
  }
  turns.push({ answer: 'done' });
  return turns;
}

/**
 * Own time per model step: whole step-script tasks, one after another (ten to warm up), minus the time the mock
 * model spent on them, with a bare round trip after each task to scale it by.
 */
export async function ownTimePerStep(
  agentUrl: string,
  model: { busyMs(): number },
  bareUrl: string,
  tasks: number,
): Promise<LatencyRun['step']> {
  const task = (i: number) =>
    postFast(`${agentUrl}/agent/execute_task`, { goal: `${goalMarker(`step${i}`)} echo` }).then((r) => {
      if (r.status !== 'completed') throw new Error(`step task ended ${r.status}: ${r.error}`);
      return r.steps as number;
    });
  for (let i = 0; i < 10; i++) await task(i);
  const bareForSteps: number[] = [];
  let steps = 0;
  let own = 0;
  for (let i = 0; i < tasks; i++) {
    const modelBefore = model.busyMs();
    const started = performance.now();
    steps += await task(100 + i);
    own += performance.now() - started - (model.busyMs() - modelBefore);
    const b = performance.now();
    await bareRoundTrip(bareUrl);
    bareForSteps.push(performance.now() - b);
  }
  return { ownMsPerStep: own / steps, steps, tasks, bareRtt: percentile(bareForSteps, 0.5) };
}

/**
 * The stack the step figures run on, in `dir`: the probe toolset and tools, a mock model playing the step
 * script, and a bare server to scale by; `env` is added to the stack's environment. Goal priming is off: the
 * step script activates its toolset itself whatever is active, so a primed activation would be done twice and
 * counted as the steps' own time (its cost and what it saves are figure 2's primed arm).
 */
export async function startProbeStack(dir: string, env: Record<string, string> = {}) {
  const toolsetsDir = path.join(dir, 'toolsets');
  await mkdir(toolsetsDir, { recursive: true });
  await writeFile(path.join(toolsetsDir, 'bench_probes.yaml'), PROBE_TOOLSET);
  const script = stepScript();
  const model = await startMockModel({ script: (_key, turn) => script[turn] });
  const bare = await startBareServer();
  const stack = await startBenchStack({
    dir,
    modelUrl: model.url,
    toolsetsDir,
    workspace: path.join(dir, 'ws'),
    extraTools: probeTools,
    env: { AGENT_PRIME_TOOLSETS: 'false', ...env },
  });
  let stopped: Promise<void> | undefined;
  /** Closes the stack once, however often it is asked. */
  const closeStack = () => {
    stopped ??= stack.close();
    return stopped;
  };
  return {
    model,
    bare,
    /** The stack; closing it early (to have its last spans sent) leaves the rest to close(). */
    stack: { ...stack, close: closeStack },
    async close() {
      await closeStack();
      await bare.close();
      await model.close();
    },
  };
}

/** Runs figures 6–8 in `dir`; `rounds` samples per probe. */
export async function latencyRun(dir: string, rounds = 400): Promise<LatencyRun> {
  const probes = await startProbeStack(dir);
  const { model, bare, stack } = probes;
  try {
    // The agent-server's own client of the gateway, exactly as a task uses it.
    const gateway = createGatewayClient({ baseUrl: stack.gatewayUrl });
    await gateway.changeToolsets({ action: 'ACTIVATE', toolset_ids: ['bench_probes'], session_id: 'hop' });
    // Direct: the gateway's own client of the tool-server, called from here instead of from the gateway.
    const toolServer = toolServerBackend({ baseUrl: stack.toolsUrl });
    const direct = (tool: string) => () =>
      toolServer.callTool(tool, { text: 'ping' }).then((r) => {
        if (!r.success) throw new Error(`${tool} failed directly`);
      });
    const via = (tool: string) => () =>
      gateway.callTool('hop', tool, { text: 'ping' }).then((r) => {
        if (!r.success) throw new Error(`${tool} failed through the gateway`);
      });
    const echo = await interleaved(rounds, {
      bare: () => bareRoundTrip(bare.url),
      direct: direct('bench_echo'),
      via: via('bench_echo'),
    });
    const delay = await interleaved(Math.max(50, Math.round(rounds / 4)), {
      direct: direct('bench_delay'),
      via: via('bench_delay'),
    });
    // Toggle: ACTIVATE and DEACTIVATE in turn, each answered with the session's new tool list.
    let on = false;
    const toggle = await interleaved(rounds, {
      manage: async () => {
        on = !on;
        const res = await gateway.manageToolsets('toggle', {
          action: on ? 'ACTIVATE' : 'DEACTIVATE',
          toolset_ids: ['bench_probes'],
        });
        if (!res.change || !res.tools) throw new Error('the toggle changed nothing');
      },
      call: via('bench_echo'),
    });

    const step = await ownTimePerStep(stack.agentUrl, model, bare.url, Math.max(20, Math.round(rounds / 8)));
    const p50 = (xs: number[]) => percentile(xs, 0.5);
    return {
      bareRtt: p50(echo.bare),
      echo: { direct: p50(echo.direct), viaGateway: p50(echo.via) },
      delay: { direct: p50(delay.direct), viaGateway: p50(delay.via) },
      toggle: { manage: p50(toggle.manage), call: p50(toggle.call) },
      step,
      rounds,
    };
  } finally {
    await probes.close();
  }
}

/** The delay the slow probe adds, for the report. */
export { PROBE_DELAY_MS };
