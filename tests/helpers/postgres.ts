import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

// A throwaway PostgreSQL server for one test run: a cluster made with initdb in a temp directory, started with
// pg_ctl on a free loopback port (no Unix socket outside that directory), stopped and removed at the end. The
// server binaries are Debian's `postgresql` package (.ci/run installs it when missing); initdb refuses to run
// as root, so as root the cluster belongs to the `postgres` user.

/** Where Debian puts the server binaries (the newest major version found). */
function binDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = execFileSync('ls', [root], { encoding: 'utf8' })
    .split('\n')
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  const found = versions
    .map((v) => path.join(root, v, 'bin'))
    .find((d) => existsSync(path.join(d, 'pg_ctl')));
  return found;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface TestPostgres {
  /** `postgres://…` of the cluster's `postgres` database (tests make their own databases in it). */
  url: string;
  stop(): void;
  /** Stops the server (`pg_ctl stop -m fast`: connections are cut) and keeps its data, for a later `restart`. */
  halt(): void;
  /** Starts a halted server again on the same port, with its data. */
  restart(): void;
}

/** Starts a cluster, or throws saying what to install. */
export async function startTestPostgres(): Promise<TestPostgres> {
  const bin = binDir();
  if (!bin) {
    throw new Error(
      'PostgreSQL server binaries not found under /usr/lib/postgresql: install Debian\'s "postgresql" package ' +
        '(apt-get install -y postgresql); the PostgreSQL tests start a throwaway server from them',
    );
  }
  const asRoot = process.getuid?.() === 0;
  const run = (cmd: string, args: string[]) => {
    const full = asRoot
      ? ['runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args]]
      : [path.join(bin, cmd), args];
    const out = spawnSync(full[0] as string, full[1] as string[], { encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`${cmd} failed (${out.status}): ${out.stderr || out.stdout}`);
    return out.stdout;
  };
  const runAsync = (cmd: string, args: string[]) => {
    const [file, argv] = asRoot
      ? ['runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args]]
      : [path.join(bin, cmd), args];
    return new Promise<void>((resolve, reject) => {
      execFile(file, argv, { encoding: 'utf8' }, (err, stdout, stderr) => {
        if (err) reject(new Error(`${cmd} failed (${err.code}): ${stderr || stdout}`));
        else resolve();
      });
    });
  };
  const dir = mkdtempSync(path.join(tmpdir(), 'toolshift-pg-'));
  const data = path.join(dir, 'data');
  if (asRoot) execFileSync('chown', ['postgres:postgres', dir]);
  const password = 'toolshift-test';
  const pwfile = path.join(dir, 'pw');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (asRoot) chownSync(pwfile, Number(execFileSync('id', ['-u', 'postgres']).toString()), 0);
  await runAsync('initdb', [
    '-D',
    data,
    '-U',
    'postgres',
    '--auth=scram-sha-256',
    `--pwfile=${pwfile}`,
    '-E',
    'UTF8',
    '--no-sync',
  ]);
  const port = await freePort();
  const options = `-c listen_addresses=127.0.0.1 -c port=${port} -c unix_socket_directories=${dir} -c fsync=off -c max_connections=200`;
  const startArgs = ['-D', data, '-o', options, '-l', path.join(dir, 'log'), '-w', '-t', '60', 'start'];
  const start = () => run('pg_ctl', startArgs);
  await runAsync('pg_ctl', startArgs);
  let up = true;
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    halt: () => {
      run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      up = false;
    },
    restart: () => {
      start();
      up = true;
    },
    stop() {
      try {
        if (up) run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

export interface PostgresBroker {
  /** `http://127.0.0.1:…/`: a GET answers `{ url }` of the run's server, started on the first GET, or `{ error }`. */
  url: string;
  /** Stops the server, if one was started, and the broker. */
  close(): Promise<void>;
}

/**
 * The test run's PostgreSQL on demand (tests/helpers/global-setup.ts runs this in vitest's main process): no
 * server until a worker asks, then one cluster for the whole run, shared by every worker and project.
 */
export async function startPostgresBroker(): Promise<PostgresBroker> {
  let server: Promise<TestPostgres> | undefined;
  const broker = http.createServer((_req, res) => {
    server ??= startTestPostgres();
    server.then(
      (pg) => res.end(JSON.stringify({ url: pg.url })),
      (err: Error) => res.end(JSON.stringify({ error: err.message })),
    );
  });
  await new Promise<void>((resolve) => broker.listen(0, '127.0.0.1', resolve));
  const { port } = broker.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    async close() {
      broker.closeAllConnections();
      await new Promise((resolve) => broker.close(resolve));
      const started = await server?.catch(() => undefined);
      started?.stop();
    },
  };
}

let brokered: Promise<string> | undefined;

/** The run's server: TOOLSHIFT_TEST_POSTGRES_URL when set (the benchmark sets it), else the broker's. */
function serverUrl(): Promise<string> {
  const set = process.env.TOOLSHIFT_TEST_POSTGRES_URL;
  if (set) return Promise.resolve(set);
  const broker = process.env.TOOLSHIFT_TEST_POSTGRES_BROKER;
  if (!broker)
    return Promise.reject(new Error('no test PostgreSQL server (tests/helpers/global-setup.ts not run)'));
  brokered ??= fetch(broker).then(async (res) => {
    const answer = (await res.json()) as { url?: string; error?: string };
    if (!answer.url) throw new Error(answer.error ?? 'no test PostgreSQL server');
    return answer.url;
  });
  return brokered;
}

/**
 * A fresh database on the test run's server, for one test file or store: its URL. The first call in a run starts
 * the server (startPostgresBroker). Fails, saying why, when there is no server (the PostgreSQL tests are never
 * skipped).
 */
export async function freshDatabase(prefix = 't'): Promise<string> {
  const url = await serverUrl();
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const name = `${prefix}_${Math.random().toString(36).slice(2, 10)}`;
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return url.replace(/\/postgres$/, `/${name}`);
}
