import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
  const dir = mkdtempSync(path.join(tmpdir(), 'toolshift-pg-'));
  const data = path.join(dir, 'data');
  if (asRoot) execFileSync('chown', ['postgres:postgres', dir]);
  const password = 'toolshift-test';
  const pwfile = path.join(dir, 'pw');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (asRoot) chownSync(pwfile, Number(execFileSync('id', ['-u', 'postgres']).toString()), 0);
  run('initdb', [
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
  const start = () =>
    run('pg_ctl', ['-D', data, '-o', options, '-l', path.join(dir, 'log'), '-w', '-t', '60', 'start']);
  start();
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

/**
 * A fresh database on the test run's server, for one test file or store: its URL. Fails, saying why, when the
 * run has no server (the PostgreSQL tests are never skipped).
 */
export async function freshDatabase(prefix = 't'): Promise<string> {
  const url = process.env.TOOLSHIFT_TEST_POSTGRES_URL;
  if (!url) throw new Error(process.env.TOOLSHIFT_TEST_POSTGRES_ERROR ?? 'no test PostgreSQL server');
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
