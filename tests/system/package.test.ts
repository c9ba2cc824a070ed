import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { goalMarker, startMockModel } from '../../bench/mock-model.ts';
import { startRegistry, uncachedPins } from '../helpers/registry.ts';

// The package as a user gets it: `npm publish` (its pack step builds dist/ and ships the lockfile as
// npm-shrinkwrap.json) to a registry on loopback that holds only toolshift (tests/helpers/registry.ts), then
// `npm i -g toolshift` from it into an empty prefix — every dependency comes from the shrinkwrap and the npm
// cache `npm ci` filled, nothing from a network (better-sqlite3 is compiled for this Node, as on a machine
// without a prebuilt binary) — then `toolshift serve` started from an empty directory with a fresh HOME, and
// a scripted task through the installed CLI. Nothing here reads the source tree once it is published.

const repo = process.cwd();
const tmp = mkdtempSync(path.join(tmpdir(), 'toolshift-package-'));
const prefix = path.join(tmp, 'prefix');
const home = path.join(tmp, 'home');
const elsewhere = path.join(tmp, 'elsewhere');
const bin = path.join(prefix, 'bin', 'toolshift');
const installed = path.join(prefix, 'lib', 'node_modules', 'toolshift');
const run = promisify(execFile);
let registry: Awaited<ReturnType<typeof startRegistry>>;

/**
 * npm as the user runs it, with this test's Node first on PATH (the shebangs find it there). Asynchronous: the
 * registry it talks to answers from this process.
 */
async function npm(args: string[], cwd: string): Promise<string> {
  const { stdout } = await run('npm', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH}` },
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/** The environment of the installed command: no TOOLSHIFT_* or XDG_* from the test run, HOME a fresh one. */
function userEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: `${path.join(prefix, 'bin')}:${path.dirname(process.execPath)}:/usr/bin:/bin`,
    HOME: home,
    ...extra,
  };
}

beforeAll(async () => {
  const npmCache = (await npm(['config', 'get', 'cache'], repo)).trim();
  // What this test needs: every dependency's tarball in npm's cache, as `npm ci` in this checkout leaves them.
  const missing = uncachedPins(npmCache, path.join(repo, 'package-lock.json'));
  if (missing.length > 0) {
    throw new Error(
      `this test installs toolshift's dependencies from npm's cache (${npmCache}), where \`npm ci\` in this ` +
        `checkout leaves every tarball it fetched; ${missing.length} are not there (${missing.slice(0, 5).join(', ')}` +
        `${missing.length > 5 ? ', …' : ''}): run \`npm ci\` here with this cache (\`npm config get cache\`), then the test`,
    );
  }
  registry = await startRegistry(npmCache);
  const host = registry.url.replace(/^http:/, '');
  const at = ['--registry', `${registry.url}/`, `--${host}/:_authToken=test`];
  // Pack from a copy of the tracked files (a green run must not depend on an uncommitted one, and the checkout
  // must not see prepack's dist/ appear under the other tests); node_modules is linked for the compiler.
  const src = path.join(tmp, 'src');
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: repo,
    encoding: 'utf8',
  })
    .split('\0')
    .filter((f) => f !== '' && existsSync(path.join(repo, f)));
  for (const f of files) cpSync(path.join(repo, f), path.join(src, f), { recursive: true });
  symlinkSync(path.join(repo, 'node_modules'), path.join(src, 'node_modules'));
  await npm(['publish', ...at], src);
  rmSync(src, { recursive: true, force: true });
  for (const dir of [prefix, home, elsewhere]) mkdirSync(dir, { recursive: true });
  // --prefer-offline: what the cache holds is used as is; anything else is asked of the loopback registry
  // (npm sends the shrinkwrap's registry URLs there too), which has only toolshift.
  await npm(
    [
      'install',
      '--global',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      ...at,
      '--prefix',
      prefix,
      'toolshift',
    ],
    elsewhere,
  );
}, 600_000);

afterAll(async () => {
  await registry?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('npm publish, npm i -g, toolshift serve', () => {
  it('packs the built JavaScript, the shipped toolsets and prompts, and the pinned tree, but no sources or tests', () => {
    const names = readdirSync(installed).sort();
    expect(names).toEqual(
      expect.arrayContaining(['bin', 'dist', 'toolsets', 'prompts', 'package.json', 'npm-shrinkwrap.json']),
    );
    for (const absent of ['tests', 'bench', 'scripts', 'agent-server', 'client.ts', 'tsconfig.json'])
      expect(names).not.toContain(absent);
    expect(existsSync(path.join(installed, 'dist', 'start', 'entry.js'))).toBe(true);
    for (const shipped of [
      'toolsets/file_system_tools.yaml',
      'toolsets/memory.yaml',
      'prompts/review-diff.yaml',
    ])
      expect(existsSync(path.join(installed, shipped))).toBe(true);
    // The dependencies are the ones the lockfile pins (the shrinkwrap), not the newest their ranges allow.
    const lock = JSON.parse(readFileSync(path.join(repo, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version: string }>;
    };
    const hono = JSON.parse(
      readFileSync(path.join(installed, 'node_modules', 'hono', 'package.json'), 'utf8'),
    );
    expect(hono.version).toBe(lock.packages['node_modules/hono'].version);
    expect(existsSync(path.join(installed, 'node_modules', 'vitest'))).toBe(false);
  });

  it('answers --version and help from the installed command', () => {
    const version = JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')).version;
    const out = execFileSync(bin, ['--version'], { cwd: elsewhere, env: userEnv(), encoding: 'utf8' });
    expect(out).toBe(`toolshift ${version}\n`);
    const help = execFileSync(bin, ['serve', '--help'], { cwd: elsewhere, env: userEnv(), encoding: 'utf8' });
    expect(help).toMatch(/^toolshift serve — start the daemon/);
  });

  it('serves from the user data directory, printed at start, and runs a scripted task through the installed CLI', async () => {
    // Activates the shipped file and memory toolsets (memory is an upstream MCP server the package brought
    // along), writes a file and remembers something, then answers.
    // And a task in code mode: its script runs in the sandbox's worker as the package built it (dist/).
    const coded = [
      {
        calls: [
          {
            id: 'a',
            name: 'manage_toolsets',
            arguments: { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] },
          },
        ],
      },
      {
        calls: [
          {
            id: 'r',
            name: 'run_code',
            arguments: {
              code: "const w = await write_file({ path: 'code.txt', content: 'from a script\\n' });\nreturn w.action;",
            },
          },
        ],
      },
      { answer: 'wrote code.txt' },
    ];
    const model = await startMockModel({
      script: (key, turn) =>
        key === 'pkg-code'
          ? coded[turn]
          : [
              {
                calls: [
                  {
                    id: 'a',
                    name: 'manage_toolsets',
                    arguments: { action: 'ACTIVATE', toolset_ids: ['file_system_tools', 'memory'] },
                  },
                ],
              },
              {
                calls: [
                  {
                    id: 'w',
                    name: 'write_file',
                    arguments: { path: 'hello.txt', content: 'from the package\n' },
                  },
                  {
                    id: 'm',
                    name: 'create_entities',
                    arguments: {
                      entities: [{ name: 'toolshift', entityType: 'package', observations: ['installed'] }],
                    },
                  },
                ],
              },
              { answer: 'wrote hello.txt' },
            ][turn],
    });
    let daemon: ChildProcess | undefined;
    try {
      daemon = spawn(bin, ['serve'], {
        cwd: elsewhere,
        env: userEnv({
          AGENT_PORT: '0',
          GATEWAY_PORT: '0',
          TOOL_SERVER_PORT: '0',
          OPENAI_BASE_URL: model.url,
          OPENAI_API_KEY: 'test',
          LOG_LEVEL: 'warn',
        }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      const exited = new Promise<number | null>((r) => daemon?.once('exit', (code) => r(code)));
      const ready = await new Promise<string>((resolve, reject) => {
        daemon?.stderr?.on('data', (c: Buffer) => {
          stderr += c;
          const line = stderr.split('\n').find((l) => l.startsWith('toolshift ready: '));
          if (line) resolve(line);
        });
        void exited.then((code) => reject(new Error(`toolshift serve exited (${code}): ${stderr}`)));
      });
      // The data directory is the user's (XDG default under the fresh HOME), said in the ready line.
      const data = path.join(home, '.local', 'share', 'toolshift');
      expect(ready).toContain(
        'data in ~/.local/share/toolshift (SQLite), files in ~/.local/share/toolshift/workspace;',
      );
      expect(ready).toMatch(/; next: toolshift toolsets$/);
      expect(readdirSync(data)).toEqual(
        expect.arrayContaining(['agent.db', 'gateway.db', 'credentials.json']),
      );
      const agentUrl = /agent API (\S+),/.exec(ready)?.[1] as string;
      const gatewayUrl = /MCP endpoint (\S+)\/mcp/.exec(ready)?.[1] as string;
      const cliEnv = userEnv({ AGENT_URL: agentUrl, GATEWAY_URL: gatewayUrl });

      const toolsets = JSON.parse(
        execFileSync(bin, ['toolsets', '--json'], { cwd: elsewhere, env: cliEnv, encoding: 'utf8' }),
      ) as { toolsets: { id: string }[] };
      expect(toolsets.toolsets.map((t) => t.id).sort()).toEqual(
        readdirSync(path.join(installed, 'toolsets'))
          .filter((f) => f.endsWith('.yaml') && f !== 'policy.yaml')
          .map((f) => f.replace(/\.yaml$/, ''))
          .sort(),
      );

      // Spawned, not run synchronously: the mock model answers from this process.
      const runInstalled = async (...argv: string[]) => {
        const child = spawn(bin, argv, { cwd: elsewhere, env: cliEnv, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (c: Buffer) => {
          out += c;
        });
        child.stderr.on('data', (c: Buffer) => {
          err += c;
        });
        const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
        return { code, out, err };
      };
      const { code, out, err } = await runInstalled(
        'run',
        '--json',
        `${goalMarker('pkg')} write hello.txt and remember me`,
      );
      expect(code, err).toBe(0);
      // --json: one line per event, then the result.
      const result = JSON.parse(out.trim().split('\n').at(-1) as string) as Record<string, unknown>;
      expect(result).toMatchObject({ type: 'result', status: 'completed', final_answer: 'wrote hello.txt' });
      // What the tools did is on disk, in the user's data directory.
      expect(readFileSync(path.join(data, 'workspace', 'hello.txt'), 'utf8')).toBe('from the package\n');
      expect(readFileSync(path.join(data, 'memory.jsonl'), 'utf8')).toContain('"name":"toolshift"');

      const inCode = await runInstalled(
        'run',
        '--json',
        '--exposure',
        'code',
        `${goalMarker('pkg-code')} write code.txt from a script`,
      );
      expect(inCode.code, inCode.err).toBe(0);
      const lines = inCode.out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; data?: Record<string, unknown> });
      expect(lines.at(-1)).toMatchObject({
        type: 'result',
        status: 'completed',
        final_answer: 'wrote code.txt',
      });
      const ran = lines.find((l) => l.type === 'tool_call' && l.data?.name === 'run_code');
      expect(ran?.data).toMatchObject({
        ok: true,
        output: 'returned: "created"\n[run_code: 1 call: write_file]',
      });
      expect(readFileSync(path.join(data, 'workspace', 'code.txt'), 'utf8')).toBe('from a script\n');

      daemon.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      daemon?.kill('SIGKILL');
      await model.close();
    }
  }, 120_000);
});
