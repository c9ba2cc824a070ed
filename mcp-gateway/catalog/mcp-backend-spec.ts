import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { installationDir } from '../../lib/config/installation.ts';
import type { McpServerSpec } from '../backends/mcp-connection.ts';
import { Redactor } from '../backends/redactor.ts';
import { expandVariables, isToolshiftSetting, referencedVariables } from './env-expand.ts';
import type { McpBlock } from './toolset-schema.ts';

// An upstream MCP server as a toolset file names it (`backend: {mcp: …}`), its `${VAR}`s filled from the
// environment; and, for the variables each person may set for themselves (`user_secrets`), the server as one
// person's calls reach it, filled with their own values over the shared ones.

type Fail = (where: readonly PropertyKey[], message: string) => never;

/** An upstream MCP server as one or more toolset files name it. */
export interface McpBackendSpec {
  /** Filled in: what the gateway runs or reaches. Held in memory only. */
  server: McpServerSpec;
  /** As written in the file, `${VAR}` unexpanded: what the admin API shows. */
  display: Record<string, unknown>;
  /** Files with the same server share one connection. */
  key: string;
  /** The command or URL as written, for messages. */
  label: string;
  redactor: Redactor;
  /** The variables each person may set for themselves, when the file names any. */
  personal?: Personal;
  /** Each person reaches the server with their own OAuth grant (`oauth:`): every call is a person's. */
  oauth?: OAuthSpec;
}

/** An OAuth toolset's client settings, filled in (mcp-gateway/backends/oauth-accounts.ts uses them). */
export interface OAuthSpec {
  /** The MCP server: the protected resource, whose metadata names its authorization server. */
  resource: string;
  /** Asked for at every connection. */
  scopes: string[];
  /** A registered client; none: the gateway registers itself (RFC 7591). */
  client?: { client_id: string; client_secret?: string };
  revokeOnDeactivate: boolean;
  /** The scopes each tool (the server's own name) needs, from the file's `tool_scopes`. */
  toolScopes: Record<string, string[]>;
}

/** A server whose variables each person may set (`user_secrets`). */
export interface Personal {
  /** The variables, in the file's order. */
  names: string[];
  /** Those the environment sets no shared value of: a call without the person's own cannot be made. */
  unset: string[];
  /** The server as a person with these values reaches it: its spec, the key of its connection, its redactor. */
  serverWith(values: Record<string, string>): { server: McpServerSpec; key: string; redactor: Redactor };
}

export function mcpBackend(
  file: string,
  raw: z.infer<typeof McpBlock>,
  vars: Record<string, string | undefined>,
  declared: ReadonlySet<string>,
  personal: ReadonlySet<string>,
  fail: Fail,
): McpBackendSpec {
  for (const name of referencedVariables(JSON.stringify(raw))) {
    if (declared.has(name)) continue;
    const setting = isToolshiftSetting(name)
      ? `; ${name} is one of toolshift's own settings, which a toolset gets only when allow_toolshift_settings names it (its value is then sent to this server)`
      : `; add it to the file's declared variables (variables: [${name}])`;
    const where = locate(raw, name);
    fail(where, `variable ${name} (used in ${where.join('.')}) is not declared${setting}`);
  }
  const secretsOf = (values: Record<string, string | undefined>) => {
    const secrets: Record<string, string> = {};
    for (const name of referencedVariables(JSON.stringify(raw))) {
      const value = declared.has(name) ? values[name] : undefined;
      if (value !== undefined) secrets[name] = value;
    }
    return secrets;
  };
  // A person's own variable the environment leaves unset stands empty in the shared server (never reached).
  const unset = [...personal].filter((name) => vars[name] === undefined);
  const shared = { ...vars, ...Object.fromEntries(unset.map((n) => [n, ''])) };
  const server = serverOf(file, raw, shared, fail);
  const label = raw.command
    ? [path.basename(raw.command), ...(raw.args ?? [])].join(' ')
    : (raw.url as string);
  const key = JSON.stringify(server);
  const spec: McpBackendSpec = { server, display: raw, key, label, redactor: new Redactor(secretsOf(vars)) };
  if (raw.oauth) {
    if (personal.size > 0)
      fail(['user_secrets'], "an oauth server takes each person's grant, not user_secrets");
    if (
      server.transport === 'http' &&
      Object.keys(server.headers).some((h) => h.toLowerCase() === 'authorization')
    )
      fail(
        ['backend', 'mcp', 'headers'],
        "an oauth server gets each person's token: leave out the Authorization header",
      );
    const { client_id, client_secret } = raw.oauth;
    const secret =
      client_secret === undefined
        ? undefined
        : expandVariables(client_secret, vars, (name) =>
            fail(
              ['backend', 'mcp', 'oauth', 'client_secret'],
              `variable ${name} is not set (used in backend.mcp.oauth.client_secret)`,
            ),
          );
    spec.oauth = {
      resource: (server as { url: string }).url,
      scopes: raw.oauth.scopes,
      ...(client_id ? { client: { client_id, ...(secret ? { client_secret: secret } : {}) } } : {}),
      revokeOnDeactivate: raw.oauth.revoke_on_deactivate,
      toolScopes: {},
    };
    return spec;
  }
  if (personal.size === 0) return spec;
  spec.personal = {
    names: [...personal],
    unset,
    serverWith(values) {
      const own = { ...shared, ...values };
      const s = serverOf(file, raw, own, fail);
      const digest = createHash('sha256').update(JSON.stringify(s)).digest('base64url');
      return { server: s, key: `${key}\u0000${digest}`, redactor: new Redactor(secretsOf(own)) };
    },
  };
  return spec;
}

/** Where in the block a variable is used, for its error. */
function locate(raw: z.infer<typeof McpBlock>, name: string): PropertyKey[] {
  const base = ['backend', 'mcp'];
  for (const [key, value] of Object.entries(raw)) {
    if (typeof value === 'string' && value.includes(`\${${name}}`)) return [...base, key];
    if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (String(v).includes(`\${${name}}`)) return [...base, key, Array.isArray(value) ? Number(k) : k];
      }
    }
  }
  return base;
}

/** The server with every `${VAR}` filled from `vars`. */
function serverOf(
  file: string,
  raw: z.infer<typeof McpBlock>,
  vars: Record<string, string | undefined>,
  fail: Fail,
): McpServerSpec {
  const base = ['backend', 'mcp'];
  const fill = (value: string, where: PropertyKey[]) =>
    expandVariables(value, vars, (name) =>
      fail(where, `variable ${name} is not set (used in ${where.join('.')}); export it or add it to .env`),
    );
  const protocol = raw.protocol ?? (raw.command ? 'legacy' : 'auto');
  if (raw.command) {
    const env: Record<string, string> = {};
    for (const key of ['PATH', 'HOME']) if (vars[key] !== undefined) env[key] = vars[key] as string;
    for (const [k, v] of Object.entries(raw.env ?? {})) env[k] = fill(v, [...base, 'env', k]);
    const cwd = raw.cwd ? path.resolve(path.dirname(file), fill(raw.cwd, [...base, 'cwd'])) : undefined;
    return {
      transport: 'stdio',
      command: resolveCommand(fill(raw.command, [...base, 'command']), path.dirname(file)),
      args: (raw.args ?? []).map((a, i) => fill(a, [...base, 'args', i])),
      env,
      cwd,
      protocol,
    };
  }
  const url = fill(raw.url as string, [...base, 'url']);
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {}
  if (!parsed || !/^https?:$/.test(parsed.protocol)) fail([...base, 'url'], 'url must be an http(s) URL');
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw.headers ?? {})) headers[k] = fill(v, [...base, 'headers', k]);
  return { transport: 'http', url, headers, protocol };
}

/** Where the toolshift checkout keeps its npm binaries (servers installed as dependencies). */
const PACKAGE_BIN = path.join(installationDir(), 'node_modules', '.bin');

/** A bare command from node_modules/.bin (the working directory's, then toolshift's own), else from PATH. */
export function resolveCommand(command: string, fileDir: string): string {
  if (command.includes('/')) return path.resolve(fileDir, command);
  for (const bin of [path.resolve('node_modules', '.bin'), PACKAGE_BIN]) {
    const candidate = path.join(bin, command);
    if (existsSync(candidate)) return candidate;
  }
  return command;
}
