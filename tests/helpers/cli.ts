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
