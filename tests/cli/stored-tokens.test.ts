import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../client.ts';
import { addressesFile, readAddresses, recordAddress, recordListening } from '../../lib/config/addresses.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { withCredentials } from '../../lib/config/credentials.ts';
import { userDataDir } from '../../lib/config/installation.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startStack } from '../../start/stack.ts';

// Stored tokens go only to the daemon that made them: the CLI run in a repository whose .env names a
// listener the test owns, and pointed elsewhere from the environment. Proved by what that listener received.

const BIN = path.resolve('bin/toolshift.js');
let tmp: string;
let home: string;
let repo: string;
let services: Listening[] = [];
let agentUrl: string;
let gatewayUrl: string;
/** Every token the daemon made (what must never reach a listener of the test's). */
let stored: Record<string, string>;

interface Received {
  method?: string;
  url?: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A plain HTTP listener that records every request whole; answers 200 `{}`, or what `answer` says. */
async function recorder(answer?: (res: import('node:http').ServerResponse) => void) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c;
    });
    req.on('end', () => {
      received.push({ method: req.method, url: req.url, headers: req.headers, body });
      if (answer) return answer(res);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, received, close: () => new Promise<void>((r) => server.close(() => r())) };
}
type Recorder = Awaited<ReturnType<typeof recorder>>;
const listeners: Recorder[] = [];
let hostile: Recorder;

/** No stored token anywhere in what `r` received: headers or body. */
function expectNoStoredToken(r: Recorder) {
  const seen = JSON.stringify(r.received);
  for (const [variable, token] of Object.entries(stored)) expect(seen, variable).not.toContain(token);
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-stored-tokens-'));
  home = path.join(tmp, 'home');
  repo = path.join(tmp, 'repo');
  await mkdir(path.join(tmp, 'ws'), { recursive: true });
  await mkdir(repo, { recursive: true });
  // The daemon as `npm start` runs it: the user's data directory (from HOME), tokens made at first start.
  const config = withCredentials(
    loadConfig({
      HOME: home,
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      FS_ROOTS: path.join(tmp, 'ws'),
      LOG_LEVEL: 'silent',
      AGENT_PRIME_TOOLSETS: 'false',
    }),
  );
  expect(config.dataDir).toBe(userDataDir({ HOME: home }));
  const { tools, gateway, agent } = await startStack(config);
  services = [agent, gateway, tools];
  agentUrl = agent.url;
  gatewayUrl = gateway.url;
  stored = JSON.parse(readFileSync(config.auth.credentialsFile, 'utf8'));
  hostile = await recorder();
  listeners.push(hostile);
  // A repository's .env that names the listener for everything the CLI could read from it.
  await writeFile(
    path.join(repo, '.env'),
    [
      `AGENT_URL=${hostile.url}`,
      `GATEWAY_URL=${hostile.url}`,
      `HOST=127.0.0.1`,
      `AGENT_PORT=${new URL(hostile.url).port}`,
      `GATEWAY_PORT=${new URL(hostile.url).port}`,
      `TOOLSHIFT_DATA_DIR=${path.join(tmp, 'elsewhere')}`,
      '',
    ].join('\n'),
  );
}, 60_000);

afterAll(async () => {
  for (const s of services) await s.close();
  for (const l of listeners) await l.close();
  await rm(tmp, { recursive: true, force: true });
});

/** The real `toolshift` command in `cwd`, with the user's environment (HOME only: no URL, no token). */
async function toolshift(cwd: string, ...argv: string[]) {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [BIN, ...argv], {
      cwd,
      env: { PATH: process.env.PATH, HOME: home },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** The CLI in this process with `env` as the user's environment, over real HTTP. */
async function cli(env: Record<string, string>, ...argv: string[]) {
  const out = { stdout: '', stderr: '' };
  const code = await main(argv, {
    stdout: (t) => {
      out.stdout += t;
    },
    stderr: (t) => {
      out.stderr += t;
    },
    env: { HOME: home, ...env },
  });
  return { code, ...out };
}

describe('the daemon records where it listens, beside its tokens', () => {
  it('each service writes its origin to addresses.json (0600) in the credentials directory', () => {
    const file = addressesFile(path.join(userDataDir({ HOME: home }), 'credentials.json'));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({
      'agent-server': [agentUrl],
      'mcp-gateway': [gatewayUrl],
    });
  });

  it('services starting at once on one data directory each keep their address', async () => {
    const credentials = path.join(tmp, 'replicas', 'credentials.json');
    const origins = Array.from({ length: 6 }, (_, i) => `http://127.0.0.1:${9100 + i}`);
    await Promise.all(origins.map((o) => recordAddress(credentials, 'mcp-gateway', o)));
    expect(new Set(readAddresses(credentials)['mcp-gateway'])).toEqual(new Set(origins));
  });

  it('the names ALLOWED_HOSTS gives a service (a compose network) are recorded after where it listens', async () => {
    const credentialsFile = path.join(tmp, 'compose', 'credentials.json');
    const config = { auth: { credentialsFile }, http: { allowedHosts: ['mcp-gateway', 'lb:9000'] } };
    await recordListening(config, 'mcp-gateway', 'http://127.0.0.1:8080', { warn: () => {} });
    expect(readAddresses(credentialsFile)['mcp-gateway']).toEqual([
      'http://127.0.0.1:8080',
      'http://mcp-gateway:8080',
      'http://lb:9000',
    ]);
  });
});

describe("a repository's .env does not feed the CLI", () => {
  it('toolsets, console and tasks run there talk to the daemon at its recorded address; the listener gets nothing', async () => {
    const toolsets = await toolshift(repo, 'toolsets');
    expect(toolsets.stderr).toBe('');
    expect(toolsets).toMatchObject({ code: 0 });
    expect(toolsets.stdout).toMatch(/^file_system_tools +15 tools/m);
    const console = await toolshift(repo, 'console');
    expect(console.code).toBe(0);
    expect(console.stdout).toMatch(new RegExp(`^${agentUrl}/console/login\\?code=[\\w-]+\\n$`));
    const tasks = await toolshift(repo, 'tasks');
    expect(tasks).toMatchObject({ code: 0, stdout: 'no tasks yet: start one with toolshift run "<goal>"\n' });
    expect(hostile.received).toEqual([]);
  }, 90_000);
});

describe('a URL from the environment that is not the recorded one', () => {
  it('gets no stored token: the CLI refuses before sending, naming the setting and how to give a token', async () => {
    const env = { AGENT_URL: hostile.url, GATEWAY_URL: hostile.url };
    const toolsets = await cli(env, 'toolsets');
    const console = await cli(env, 'console');
    const tasks = await cli(env, 'tasks');
    const run = await cli(env, 'run', '--detach', 'look around');
    // Nothing at all reached the listener: no header, no console login body.
    expect(hostile.received).toEqual([]);
    expect(toolsets.code).toBe(3);
    expect(toolsets.stderr).toBe(
      `error: not sending the stored GATEWAY_ADMIN_TOKEN to ${hostile.url}: GATEWAY_URL in the environment points ` +
        `there, and the daemon that made it recorded its mcp-gateway at ${gatewayUrl}. Unset GATEWAY_URL to use ` +
        `it; to talk to ${hostile.url} on purpose, give its token in the environment: ` +
        'GATEWAY_ADMIN_TOKEN=<token> toolshift toolsets\n',
    );
    expect(console.code).toBe(3);
    expect(console.stderr).toMatch(
      /not sending the stored GATEWAY_ADMIN_TOKEN to .*: AGENT_URL in the environment/,
    );
    expect(tasks.code).toBe(3);
    expect(tasks.stderr).toMatch(/AGENT_API_TOKEN=<token> toolshift tasks\n$/);
    expect(run.code).toBe(3);
  });

  it('a daemon that recorded nothing (started before addresses were recorded) gets no stored token either', async () => {
    const data = path.join(tmp, 'older');
    await mkdir(data, { recursive: true });
    await writeFile(path.join(data, 'credentials.json'), JSON.stringify(stored), { mode: 0o600 });
    const env = { TOOLSHIFT_DATA_DIR: data, GATEWAY_PORT: new URL(hostile.url).port };
    const out = await cli(env, 'toolsets');
    expect(hostile.received).toEqual([]);
    expect(out.code).toBe(3);
    expect(out.stderr).toBe(
      `error: not sending the stored GATEWAY_ADMIN_TOKEN to ${hostile.url}: GATEWAY_PORT in the environment ` +
        `points there, and the daemon that made it has recorded no mcp-gateway address in ${data}/addresses.json ` +
        '(each service records where it listens when it starts: restart it, e.g. npm start). To talk to ' +
        `${hostile.url} on purpose, give its token in the environment: GATEWAY_ADMIN_TOKEN=<token> toolshift toolsets\n`,
    );
  });

  it('an addresses file other users can change is not believed: nothing is sent', async () => {
    const data = path.join(tmp, 'tampered');
    await mkdir(data, { recursive: true });
    await writeFile(path.join(data, 'credentials.json'), JSON.stringify(stored), { mode: 0o600 });
    const file = path.join(data, 'addresses.json');
    await writeFile(file, JSON.stringify({ 'mcp-gateway': [hostile.url] }));
    await chmod(file, 0o666);
    const out = await cli({ TOOLSHIFT_DATA_DIR: data }, 'toolsets');
    expect(hostile.received).toEqual([]);
    expect(out.code).toBe(2);
    expect(out.stderr).toBe(
      `error: the addresses file ${file} can be changed by other users (mode 666): run chmod 600 ${file}\n`,
    );
  });

  it('the recorded address itself, set in the environment, still gets the stored token', async () => {
    const toolsets = await cli({ GATEWAY_URL: gatewayUrl }, 'toolsets');
    expect(toolsets).toMatchObject({ code: 0, stderr: '' });
    expect(toolsets.stdout).toMatch(/^file_system_tools +15 tools/m);
  });

  it('with a token given in the environment, that token alone is sent', async () => {
    const target = await recorder();
    listeners.push(target);
    const given = { GATEWAY_ADMIN_TOKEN: 'given-admin-token-0123', AGENT_API_TOKEN: 'given-api-token-0123' };
    const env = { AGENT_URL: target.url, GATEWAY_URL: target.url, ...given };
    await cli(env, 'toolsets');
    await cli(env, 'console');
    await cli(env, 'tasks');
    const headerOf = (p: string) => target.received.find((r) => r.url?.startsWith(p))?.headers.authorization;
    expect(headerOf('/mcp/admin/')).toBe(`Bearer ${given.GATEWAY_ADMIN_TOKEN}`);
    expect(headerOf('/agent/tasks')).toBe(`Bearer ${given.AGENT_API_TOKEN}`);
    const link = target.received.find((r) => r.url === '/console/links');
    expect(link?.headers.authorization).toBeUndefined();
    expect(JSON.parse(link?.body ?? '{}')).toEqual({ token: given.GATEWAY_ADMIN_TOKEN });
    expectNoStoredToken(target);
  });

  it('a redirect is not followed: what the token went with stays where it was sent', async () => {
    const elsewhere = await recorder();
    const redirecting = await recorder((res) =>
      res.writeHead(307, { location: `${elsewhere.url}/console/links` }).end(),
    );
    listeners.push(elsewhere, redirecting);
    const out = await cli(
      { AGENT_URL: redirecting.url, GATEWAY_ADMIN_TOKEN: 'given-admin-token-4567' },
      'console',
    );
    expect(out.code).toBe(3);
    expect(out.stderr).toMatch(/answered 307, a redirect to .*: the CLI follows none/);
    expect(redirecting.received).toHaveLength(1);
    expect(elsewhere.received).toEqual([]);
  });
});
