import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../telemetry/log.ts';

// Where the daemon listens, recorded beside the tokens it made: `addresses.json` in the credentials file's
// directory (mode 0600), written by each service once it listens. The CLI takes its default addresses from
// it, and sends a token from the credentials file only to an origin recorded here (cli/targets.ts): a URL
// from anywhere else (AGENT_URL in the environment, a typo) gets no stored token.

/** The services that record where they listen. */
export const RECORDED_SERVICES = ['agent-server', 'mcp-gateway', 'tool-server'] as const;
export type RecordedService = (typeof RECORDED_SERVICES)[number];

/** Each service's origins (scheme://host:port), newest first. */
export type Addresses = Partial<Record<RecordedService, string[]>>;

/** Origins kept per service: replicas on one data directory each add theirs; the oldest go first. */
const MAX_PER_SERVICE = 16;
/** The file is small; anything larger is not ours. */
const MAX_BYTES = 64 * 1024;
/** A lock older than this was left by a process that died while holding it. */
const STALE_LOCK_MS = 10_000;

/** The addresses file of the daemon whose tokens are in `credentialsFile`. */
export function addressesFile(credentialsFile: string): string {
  return path.join(path.dirname(credentialsFile), 'addresses.json');
}

/** `url`'s origin (scheme://host:port), or undefined when it is not an http(s) URL. */
export function originOf(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const u = new URL(url);
  return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : undefined;
}

/** Only http(s) origins, at most MAX_PER_SERVICE of them, per known service. */
function clean(parsed: unknown, file: string): Addresses {
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(
      `the addresses file ${file} is not a JSON object: remove it (each service writes it at start)`,
    );
  }
  const out: Addresses = {};
  for (const service of RECORDED_SERVICES) {
    const list = (parsed as Record<string, unknown>)[service];
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.some((o) => typeof o !== 'string' || originOf(o) !== o)) {
      throw new Error(
        `the addresses file ${file} holds an invalid ${service} entry (a list of origins such as ` +
          'http://127.0.0.1:8000): remove the file (each service writes it at start)',
      );
    }
    out[service] = (list as string[]).slice(0, MAX_PER_SERVICE);
  }
  return out;
}

/**
 * The recorded addresses of the daemon whose tokens are in `credentialsFile` ({} when none were recorded).
 * A file others can change, or another user's, is refused: whoever could write it could send the tokens elsewhere.
 */
export function readAddresses(credentialsFile: string): Addresses {
  const file = addressesFile(credentialsFile);
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new Error(`cannot read the addresses file ${file}: ${(err as Error).message}`);
  }
  try {
    const stat = fstatSync(fd);
    const mode = stat.mode & 0o777;
    if ((mode & 0o022) !== 0) {
      throw new Error(
        `the addresses file ${file} can be changed by other users (mode ${mode.toString(8)}): run chmod 600 ${file}`,
      );
    }
    if (process.getuid && stat.uid !== process.getuid()) {
      throw new Error(
        `the addresses file ${file} belongs to another user (uid ${stat.uid}): remove it (each service writes it at start)`,
      );
    }
    if (stat.size > MAX_BYTES) {
      throw new Error(
        `the addresses file ${file} is over ${MAX_BYTES} bytes: remove it (each service writes it at start)`,
      );
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(fd, 'utf8'));
    } catch {
      throw new Error(`the addresses file ${file} is not JSON: remove it (each service writes it at start)`);
    }
    return clean(parsed, file);
  } finally {
    closeSync(fd);
  }
}

/** The file as it is, or {} when it is missing or unreadable (the writer replaces it). */
function currentOrEmpty(credentialsFile: string): Addresses {
  try {
    return readAddresses(credentialsFile);
  } catch {
    return {};
  }
}

/** Holds `<file>.lock` while `fn` runs, so services starting at once on one data directory keep each other's. */
async function withLock<T>(file: string, fn: () => T): Promise<T> {
  const lock = `${file}.lock`;
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      closeSync(openSync(lock, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      try {
        if (Date.now() - statSync(lock).mtimeMs > STALE_LOCK_MS) unlinkSync(lock);
      } catch {
        // gone meanwhile: try again
      }
      if (Date.now() > deadline)
        throw new Error(`${lock} stayed locked for 5 s: remove it if no toolshift is starting`);
      await new Promise((r) => setTimeout(r, 10 + Math.random() * 20));
    }
  }
  try {
    return fn();
  } finally {
    unlinkSync(lock);
  }
}

/**
 * Records that `service` is reached at `urls` (where it listens first), newest first, in the addresses file
 * beside `credentialsFile`: written whole to a temp file (0600) and renamed into place, under a lock.
 */
export async function recordAddress(
  credentialsFile: string,
  service: RecordedService,
  ...urls: string[]
): Promise<void> {
  const origins = urls.map((url) => {
    const origin = originOf(url);
    if (!origin) throw new Error(`cannot record ${service} at ${url}: not an http(s) URL`);
    return origin;
  });
  const file = addressesFile(credentialsFile);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await withLock(file, () => {
    const addresses = currentOrEmpty(credentialsFile);
    const older = (addresses[service] ?? []).filter((o) => !origins.includes(o));
    addresses[service] = [...new Set(origins), ...older].slice(0, MAX_PER_SERVICE);
    const temp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      writeSync(fd, `${JSON.stringify(addresses, null, 2)}\n`);
    } finally {
      closeSync(fd);
    }
    try {
      renameSync(temp, file);
    } catch (err) {
      unlinkSync(temp);
      throw err;
    }
  });
}

/**
 * What a service does once it listens: records where, beside the credentials, and the names the operator
 * said clients reach it by (ALLOWED_HOSTS: `mcp-gateway` on a compose network), on its port unless the name
 * gives one. A failure (a read-only credentials directory) is logged and the service runs on; the CLI then
 * sends no stored token to it and says why.
 */
export async function recordListening(
  config: { auth: { credentialsFile: string }; http: { allowedHosts: string[] } },
  service: RecordedService,
  url: string,
  log: Pick<Logger, 'warn'>,
): Promise<void> {
  const port = new URL(url).port;
  const named = config.http.allowedHosts.flatMap((host) => {
    if (!URL.canParse(`http://${host}`)) return [];
    const u = new URL(`http://${host}`);
    if (u.pathname !== '/' || u.username || u.search) return [];
    if (!u.port) u.port = port;
    return [u.origin];
  });
  const file = config.auth.credentialsFile;
  try {
    await recordAddress(file, service, url, ...named);
  } catch (err) {
    log.warn(
      { err: (err as Error).message, file: addressesFile(file) },
      'where this service listens could not be recorded: the CLI will not send it the stored tokens',
    );
  }
}
