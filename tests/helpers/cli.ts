import { type CliIo, main } from '../../client.ts';
import { NO_STORED_CREDENTIALS } from './credentials.ts';
import { asLoopback, type Stack } from './stack.ts';

// The CLI in-process against an in-process stack (or nothing: every connection refused), piped.

/** The CLI's io over `s`, capturing what it prints; `extra` adds environment or io fields. */
export function cliIo(
  s: Stack | undefined,
  extra: Partial<CliIo> & { envExtra?: Record<string, string> } = {},
) {
  const out = { stdout: '', stderr: '' };
  const { envExtra, ...rest } = extra;
  const io: CliIo = {
    stdout: (t) => {
      out.stdout += t;
    },
    stderr: (t) => {
      out.stderr += t;
    },
    env: { AGENT_URL: 'http://agent', GATEWAY_URL: 'http://gateway', ...NO_STORED_CREDENTIALS, ...envExtra },
    fetch: async (url, init) => {
      if (!s) throw Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
      const app = url.startsWith('http://agent') ? s.agentApp : s.gatewayApp;
      return app.request(asLoopback(url), init);
    },
    ...rest,
  };
  return { io, out };
}

/** Runs the CLI with `argv` and returns its exit code and output. */
export async function cliWith(
  extra: Partial<CliIo> & { envExtra?: Record<string, string> },
  s: Stack | undefined,
  ...argv: string[]
) {
  const { io, out } = cliIo(s, extra);
  const code = await main(argv, io);
  return { code, ...out };
}

/**
 * The CLI in-process as a person on the daemon's machine runs it (its data directory, so its stored tokens):
 * `env` adds to the environment (a user's key: AGENT_API_TOKEN), `stdin` is what is piped in (none: a terminal).
 */
export function daemonCli(dirs: { data: string; home: string }) {
  return async (argv: string[], env: Record<string, string> = {}, stdin?: string) => {
    const out = { stdout: '', stderr: '' };
    const io: CliIo = {
      stdout: (t) => {
        out.stdout += t;
      },
      stderr: (t) => {
        out.stderr += t;
      },
      env: { TOOLSHIFT_DATA_DIR: dirs.data, HOME: dirs.home, ...env },
      ...(stdin === undefined ? { stdinIsTTY: true } : { readStdin: async () => stdin, stdinIsTTY: false }),
    };
    const code = await main(argv, io);
    return { code, ...out };
  };
}

/** Users made with the operator's CLI, each with a runner key: their keys by name. */
export async function runnersOf(cli: ReturnType<typeof daemonCli>, names: string[]) {
  const keys: Record<string, string> = {};
  for (const name of names) {
    const added = await cli(['users', 'add', name]);
    if (added.code !== 0) throw new Error(`users add ${name}: ${added.stderr}`);
    const made = await cli(['keys', 'create', '--user', name, '--role', 'runner', '--json']);
    keys[name] = (JSON.parse(made.stdout) as { key: string }).key;
  }
  return keys;
}
