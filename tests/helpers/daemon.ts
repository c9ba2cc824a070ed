import { spawn } from 'node:child_process';

export type ServiceName = 'agent-server' | 'mcp-gateway' | 'tool-server';

/**
 * start/start.ts as `npm start` runs it, in its own process with exactly `env` (plus PATH); JSON logs on stdout, at
 * debug unless `env` says (started together, the services log where they listen at debug only). `listening`
 * resolves with the three services' URLs, `ready` with the ready line start/start.ts prints on stderr.
 */
export function startDaemon(env: Record<string, string>) {
  const child = spawn(process.execPath, ['start/start.ts'], {
    env: {
      PATH: process.env.PATH,
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'debug',
      // Scripted models say exactly what they activate (goal priming has tests of its own).
      AGENT_PRIME_TOOLSETS: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let readyWith: (line: string) => void = () => {};
  const ready = new Promise<string>((r) => {
    readyWith = r;
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c;
    const line = stderr.split('\n').find((l) => l.startsWith('toolshift ready: '));
    if (line) readyWith(line);
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const listening = new Promise<Record<ServiceName, string>>((resolve, reject) => {
    const urls: Partial<Record<ServiceName, string>> = {};
    let buffer = '';
    child.stdout.on('data', (c: Buffer) => {
      buffer += c;
      for (let nl = buffer.indexOf('\n'); nl !== -1; nl = buffer.indexOf('\n')) {
        const text = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        // LOG_FORMAT=pretty: no JSON to read (`ready` still says where the daemon listens).
        if (!text.startsWith('{')) continue;
        const line = JSON.parse(text) as { name: ServiceName; msg: string; url?: string };
        if (line.msg.endsWith('listening')) urls[line.name] = String(line.url);
        if (Object.keys(urls).length === 3) resolve(urls as Record<ServiceName, string>);
      }
    });
    void exited.then((code) => reject(new Error(`start/start.ts exited (${code}): ${stderr}`)));
  });
  // A test that waits for `ready` alone, or for a start that fails, does not leave this unhandled.
  listening.catch(() => {});
  const stop = async () => {
    child.kill('SIGTERM');
    return exited;
  };
  return { child, listening, ready, exited, stop, stderr: () => stderr };
}
