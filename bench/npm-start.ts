import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { createInterface } from 'node:readline';

// `npm start` as a user runs it, in a child process of the benchmark: the three services in one process,
// found among npm's descendants so its resident memory can be read from /proc, and its URLs read from the
// ready line it prints on stderr.

/** A started `npm start`. */
export interface NpmStart {
  agentUrl: string;
  gatewayUrl: string;
  /** The pid of the process running the three services. */
  pid: number;
  rssBytes(): number;
  /** CPU time the services' process(es) have used so far, user and system, in ms. */
  cpuMs(): number;
  /** Its Prometheus metrics (memory parts from Node's own gauges). */
  metrics(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

const children = (pid: number): number[] => {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((t) =>
      readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number),
    );
  } catch {
    return [];
  }
};

/** Every process below `pid`, from /proc. */
export const descendants = (pid: number): number[] => children(pid).flatMap((c) => [c, ...descendants(c)]);

/** Resident memory of a process, from /proc. */
export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** Clock ticks per second of /proc/<pid>/stat's times (sysconf CLK_TCK; 100 on Linux). */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time a process has used, user and system, from /proc. */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces, so split after its closing parenthesis).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

/** Prometheus text format to {series: value} (labels kept in the key). */
export function parseMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

/** The agent-server's token the benchmark set, as a header (none when it set none). */
function agentAuth(env: Record<string, string>): Record<string, string> {
  return env.AGENT_API_TOKEN ? { authorization: `Bearer ${env.AGENT_API_TOKEN}` } : {};
}

/** Starts `npm start` with `env` on top of this process's environment; resolves once all three listen. */
export async function startNpm(env: Record<string, string>, cwd = process.cwd()): Promise<NpmStart> {
  const child: ChildProcess = spawn('npm', ['start'], {
    cwd,
    env: { ...process.env, ...env, NO_COLOR: '1', LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const urls: Record<string, string> = {};
  const errors: string[] = [];
  // Its logs are not needed, but read: a full pipe would stall the services' log writes.
  child.stdout?.resume();
  const ready = new Promise<void>((resolve, reject) => {
    // `toolshift ready: agent API <url>, MCP endpoint <url>/mcp; …`
    const lines = createInterface({ input: child.stderr as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      errors.push(line);
      const at = /^toolshift ready: agent API (\S+), MCP endpoint (\S+)\/mcp[,;]/.exec(line);
      if (!at) return;
      urls['agent-server'] = at[1];
      urls['mcp-gateway'] = at[2];
      resolve();
    });
    child.once('exit', (code) =>
      reject(new Error(`npm start exited (${code}): ${errors.join('\n').slice(-2000)}`)),
    );
  });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    ready,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('npm start did not listen within 60 s')), 60_000);
    }),
  ]).finally(() => clearTimeout(timer));
  const pid = descendants(child.pid as number)
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('bin/toolshift.js');
      } catch {
        return false;
      }
    })
    .sort((a, b) => rssOf(b) - rssOf(a))[0];
  if (!pid) throw new Error('could not find the process npm start runs the services in');
  return {
    agentUrl: urls['agent-server'],
    gatewayUrl: urls['mcp-gateway'],
    pid,
    rssBytes: () => rssOf(pid),
    cpuMs: () => cpuMsOf(pid),
    metrics: async () =>
      parseMetrics(
        await (await fetch(`${urls['agent-server']}/metrics`, { headers: agentAuth(env) })).text(),
      ),
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        process.kill(-(child.pid as number), 'SIGTERM');
      }),
  };
}

/** A free loopback port (bound and released; the services bind it a moment later). */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/**
 * The three services as three processes, as `docker compose` runs them (`toolshift serve tool-server`, `mcp-gateway`,
 * `agent-server`, one each), so they can use more than one core. Resident memory is the three summed. With
 * `workers`, the agent-server is the agent API alone (`serve agent-api`) and that many `serve worker` processes
 * (tasks in PostgreSQL: `env` has DATABASE_URL); resident memory and CPU are every process's summed.
 */
export async function startSeparate(
  env: Record<string, string>,
  cwd = process.cwd(),
  workers = 0,
): Promise<NpmStart> {
  const [agentPort, gatewayPort, toolsPort] = [await freePort(), await freePort(), await freePort()];
  const full = {
    ...process.env,
    ...env,
    AGENT_PORT: String(agentPort),
    GATEWAY_PORT: String(gatewayPort),
    TOOL_SERVER_PORT: String(toolsPort),
    NO_COLOR: '1',
    LOG_FORMAT: 'json',
  };
  const started: ChildProcess[] = [];
  const waitFor = async (url: string) => {
    for (let i = 0; i < 200; i++) {
      const ok = await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`${url} did not come up within 50 s`);
  };
  const services: [string, number][] = [
    ['tool-server', toolsPort],
    ['mcp-gateway', gatewayPort],
    [workers > 0 ? 'agent-api' : 'agent-server', agentPort],
  ];
  for (let w = 0; w < workers; w++) services.push(['worker', await freePort()]);
  for (const [service, port] of services) {
    const child = spawn(process.execPath, ['bin/toolshift.js', 'serve', service], {
      cwd,
      env: { ...full, ...(service === 'worker' ? { AGENT_PORT: String(port) } : {}) },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    started.push(child);
    await waitFor(`http://127.0.0.1:${port}`);
  }
  const agentUrl = `http://127.0.0.1:${agentPort}`;
  const pids = started.map((c) => c.pid as number);
  return {
    agentUrl,
    gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
    pid: pids[2],
    rssBytes: () => pids.reduce((sum, p) => sum + rssOf(p), 0),
    cpuMs: () => pids.reduce((sum, p) => sum + cpuMsOf(p), 0),
    metrics: async () =>
      parseMetrics(await (await fetch(`${agentUrl}/metrics`, { headers: agentAuth(env) })).text()),
    stop: async () => {
      await Promise.all(
        started.map(
          (c) =>
            new Promise<void>((resolve) => {
              c.once('exit', () => resolve());
              c.kill('SIGTERM');
            }),
        ),
      );
    },
  };
}
