import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import type { Config } from './config.ts';

// Locked by default: every service needs a token, and on first start toolshift makes the ones the
// environment does not set, one per role, into a file only its user can read (`<data dir>/credentials.json`,
// mode 0600). Every service started on the same data directory, and the CLI, read the same file, so nobody
// types a token; the environment still wins per variable. `TOOLSHIFT_AUTH=none` opts out.

/**
 * The credentials toolshift keeps, by the variable that would otherwise set each; `publicBind` names the
 * service that refuses a non-loopback HOST without it (lib/http/security.ts securityFor).
 */
export const CREDENTIALS = {
  AGENT_API_TOKEN: {
    role: 'api',
    publicBind: 'agent-server',
    what: "the agent-server's API (tasks, approvals)",
    get: (c: Config) => c.agent.apiToken,
    set: (c: Config, v: string) => {
      c.agent.apiToken = v;
    },
  },
  GATEWAY_ADMIN_TOKEN: {
    role: 'admin',
    publicBind: 'mcp-gateway',
    what: "the gateway's operator (toolsets, reload, audit)",
    get: (c: Config) => c.gateway.adminToken,
    set: (c: Config, v: string) => {
      c.gateway.adminToken = v;
    },
  },
  GATEWAY_AGENT_TOKEN: {
    role: 'agent',
    publicBind: 'mcp-gateway',
    what: 'the agent-server, as a client of the gateway',
    get: (c: Config) => c.gateway.agentToken,
    set: (c: Config, v: string) => {
      c.gateway.agentToken = v;
    },
  },
  GATEWAY_MCP_TOKEN: {
    role: 'mcp',
    publicBind: undefined,
    what: "MCP clients of the gateway's /mcp",
    get: (c: Config) => c.gateway.mcp.token,
    set: (c: Config, v: string) => {
      c.gateway.mcp.token = v;
    },
  },
  VIEWER_TOKEN: {
    role: 'viewer',
    publicBind: undefined,
    what: 'read-only users (the console and the API: tasks, toolsets, approvals, audit)',
    get: (c: Config) => c.console.viewerToken,
    set: (c: Config, v: string) => {
      c.console.viewerToken = v;
    },
  },
  TOOL_SERVER_TOKEN: {
    role: 'tool-server',
    publicBind: 'tool-server',
    what: 'the gateway, as the tool-server’s only client',
    get: (c: Config) => c.tools.token,
    set: (c: Config, v: string) => {
      c.tools.token = v;
    },
  },
  // Not a token anyone sends: what the gateway seals people's own upstream credentials with (their API keys and
  // OAuth tokens, lib/identity/sealed.ts). Every gateway replica on one database needs the same one.
  GATEWAY_SEAL_KEY: {
    role: 'seal',
    publicBind: undefined,
    what: "the key the gateway seals people's own upstream credentials with",
    get: (c: Config) => c.gateway.sealKey,
    set: (c: Config, v: string) => {
      c.gateway.sealKey = v;
    },
  },
  // Not a token anyone sends: what tasks' webhooks are signed with, in Standard Webhooks' own format.
  AGENT_WEBHOOK_SECRET: {
    role: 'webhook',
    publicBind: undefined,
    what: "the signing secret of tasks' webhooks (receivers verify with it)",
    get: (c: Config) => c.agent.webhook.secret,
    set: (c: Config, v: string) => {
      c.agent.webhook.secret = v;
    },
    make: () => `whsec_${randomBytes(32).toString('base64')}`,
  },
} as const;

export type CredentialVariable = keyof typeof CREDENTIALS;
const VARIABLES = Object.keys(CREDENTIALS) as CredentialVariable[];

/** The variable of a role name as `toolshift token <role>` takes it (api, admin, agent, mcp, tool-server, webhook). */
export function variableOfRole(role: string): CredentialVariable | undefined {
  return VARIABLES.find((v) => CREDENTIALS[v].role === role);
}

/** A fresh token: the role in clear (for people and secret scanners), 192 random bits. */
function newToken(variable: CredentialVariable): string {
  const credential = CREDENTIALS[variable];
  if ('make' in credential) return credential.make();
  return `ts_${CREDENTIALS[variable].role.replace('-', '')}_${randomBytes(24).toString('base64url')}`;
}

/** The stored tokens, or undefined when the file does not exist; refuses a file others can read, or a bad one. */
function readFile(file: string): Partial<Record<CredentialVariable, string>> | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read the credentials file ${file}: ${(err as Error).message}`);
  }
  try {
    const mode = fstatSync(fd).mode & 0o777;
    if ((mode & 0o077) !== 0) {
      throw new Error(
        `the credentials file ${file} can be read by other users (mode ${mode.toString(8)}): run chmod 600 ${file}`,
      );
    }
    const text = readFileSync(fd, 'utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new Error(
        `the credentials file ${file} is not JSON: remove it to have new tokens made at the next start`,
      );
    }
    const out: Partial<Record<CredentialVariable, string>> = {};
    for (const variable of VARIABLES) {
      const value = (parsed as Record<string, unknown>)?.[variable];
      if (value === undefined) continue;
      if (typeof value !== 'string' || !/^[\x21-\x7e]{16,512}$/.test(value)) {
        throw new Error(
          `the credentials file ${file} holds an invalid ${variable} (16 to 512 printable characters): ` +
            'correct it, or remove the file to have new tokens made at the next start',
        );
      }
      out[variable] = value;
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/** Writes `tokens` to a new temp file (0600) beside `file`; returns its path. */
function writeTemp(file: string, tokens: Record<string, string>): string {
  const temp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    writeSync(fd, `${JSON.stringify(tokens, null, 2)}\n`);
  } finally {
    closeSync(fd);
  }
  return temp;
}

/**
 * The stored tokens, every one of them made if missing. Race-free between services starting at once on the
 * same file: a complete file is linked into place, so the first wins and the others read what it wrote.
 */
export function loadOrCreateCredentials(file: string): Record<CredentialVariable, string> {
  const existing = readFile(file);
  if (existing && VARIABLES.every((v) => existing[v])) return existing as Record<CredentialVariable, string>;
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tokens = Object.fromEntries(VARIABLES.map((v) => [v, existing?.[v] ?? newToken(v)])) as Record<
    CredentialVariable,
    string
  >;
  const temp = writeTemp(file, tokens);
  try {
    if (existing)
      renameSync(temp, file); // an older file missing a role: completed in place
    else linkSync(temp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return loadOrCreateCredentials(file); // another service made it first: use its tokens
  } finally {
    try {
      unlinkSync(temp);
    } catch {
      // renamed away
    }
  }
  return tokens;
}

/**
 * The config a service starts with: each token the environment leaves unset taken from the credentials file
 * (made on first start). Unchanged with TOOLSHIFT_AUTH=none.
 */
export function withCredentials(config: Config): Config {
  if (config.auth.mode === 'none') return config;
  const stored = loadOrCreateCredentials(config.auth.credentialsFile);
  const out = structuredClone(config);
  for (const variable of VARIABLES) {
    if (!CREDENTIALS[variable].get(out)) CREDENTIALS[variable].set(out, stored[variable]);
  }
  return out;
}

/** The tokens in the credentials file, for the CLI ({} when there is none, or with TOOLSHIFT_AUTH=none). */
export function storedCredentials(config: Config): Partial<Record<CredentialVariable, string>> {
  if (config.auth.mode === 'none') return {};
  return readFile(config.auth.credentialsFile) ?? {};
}

/** `config` with each token the environment leaves unset taken from `stored` (for `toolshift token`). */
export function withStoredCredentials(
  config: Config,
  stored: Partial<Record<CredentialVariable, string>> = storedCredentials(config),
): Config {
  const out = structuredClone(config);
  for (const variable of VARIABLES) {
    const value = stored[variable];
    if (value && !CREDENTIALS[variable].get(out)) CREDENTIALS[variable].set(out, value);
  }
  return out;
}
