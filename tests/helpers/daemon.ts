import { spawn } from 'node:child_process';

export type ServiceName = 'agent-server' | 'mcp-gateway' | 'tool-server';

/** start.ts as `npm start` runs it, in its own process with exactly `env` (plus PATH); JSON logs on stdout. */
export function startDaemon(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'start.ts'], {
    env: {
      PATH: process.env.PATH,
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      LOG_FORMAT: 'json',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const listening = new Promise<Record<ServiceName, string>>((resolve, reject) => {
    const urls: Partial<Record<ServiceName, string>> = {};
    let buffer = '';
    child.stdout.on('data', (c: Buffer) => {
      buffer += c;
      for (let nl = buffer.indexOf('\n'); nl !== -1; nl = buffer.indexOf('\n')) {
        const line = JSON.parse(buffer.slice(0, nl)) as { name: ServiceName; msg: string; url?: string };
        buffer = buffer.slice(nl + 1);
        if (line.msg.endsWith('listening')) urls[line.name] = String(line.url);
        if (Object.keys(urls).length === 3) resolve(urls as Record<ServiceName, string>);
      }
    });
    void exited.then((code) => reject(new Error(`start.ts exited (${code}): ${stderr}`)));
  });
  const stop = async () => {
    child.kill('SIGTERM');
    return exited;
  };
  return { child, listening, exited, stop, stderr: () => stderr };
}
