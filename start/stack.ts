import os from 'node:os';
import path from 'node:path';
import { startAgentServer } from '../agent-server/server.ts';
import type { Config } from '../lib/config/config.ts';
import { CREDENTIALS, type CredentialVariable } from '../lib/config/credentials.ts';
import { installationDir } from '../lib/config/installation.ts';
import { describeDatabase } from '../lib/db/reachability.ts';
import { isLoopbackHost } from '../lib/http/security.ts';
import type { Listening } from '../lib/http/serve.ts';
import { startGateway } from '../mcp-gateway/server.ts';
import type { Tool } from '../tool-server/kit/define.ts';
import { startToolServer } from '../tool-server/server.ts';

/**
 * The three services in one process, each told where the one before it really listens (port 0 works), and each
 * calling the one behind it directly rather than over loopback HTTP: the gateway the tool-server's calls, the
 * agent the gateway's hot routes (mcp-gateway/contract/local.ts) — the same rules, without a socket. Each still
 * listens for everyone else (the CLI, MCP clients, the console). Each logs where it listens at debug only: who
 * starts them together says it once (start/start.ts: its ready line).
 */
export async function startStack(
  config: Config,
  opts: { extraTools?: readonly Tool[]; link?: 'in-process' | 'http' } = {},
): Promise<{ tools: Listening; gateway: Listening; agent: Listening }> {
  const c = structuredClone(config);
  const tools = await startToolServer(c, { extraTools: opts.extraTools, announce: false });
  c.tools.url = tools.url;
  // `link: 'http'` (tests, the benchmark's comparison): each over its HTTP routes, as separate processes are.
  const linked = opts.link !== 'http';
  const gateway = await startGateway(c, { announce: false, toolServer: linked ? tools.local : undefined });
  c.gateway.url = gateway.url;
  const agent = await startAgentServer(c, { announce: false, gateway: linked ? gateway.local : undefined });
  return { tools, gateway, agent };
}

/** The order the services start in, so missing tokens are named in that order. */
const START_ORDER = ['tool-server', 'mcp-gateway', 'agent-server'] as const;

/**
 * Before `npm start` starts anything on a non-loopback HOST: every token the three services want there and do
 * not have, named at once (each service alone refuses with its own, so a user would restart once per service).
 * Only TOOLSHIFT_AUTH=none, where tokens come from the environment alone, can leave one missing.
 */
export function checkPublicBind(config: Config): void {
  if (isLoopbackHost(config.host) || config.http.insecure) return;
  const variables = Object.keys(CREDENTIALS) as CredentialVariable[];
  const missing = START_ORDER.flatMap((service) =>
    variables.filter((v) => CREDENTIALS[v].publicBind === service && !CREDENTIALS[v].get(config)),
  );
  if (missing.length === 0) return;
  throw new Error(
    `HOST=${config.host} is not a loopback address, and there every service needs its token (anyone who ` +
      'can reach the ports could use them). Missing:\n' +
      missing.map((v) => `  ${v}, for ${CREDENTIALS[v].what}\n`).join('') +
      'Set each to a value of its own (and ALLOWED_HOSTS to the names clients use), ' +
      (config.auth.mode === 'none'
        ? `or remove TOOLSHIFT_AUTH=none to have them made in ${shortPath(config.auth.credentialsFile)}, `
        : '') +
      'bind HOST=127.0.0.1, or set TOOLSHIFT_INSECURE=1 to accept the risk.',
  );
}

/** A path as the user would type it from here: relative inside the working directory, `~/…` in the home. */
function shortPath(file: string): string {
  const here = path.relative(process.cwd(), file);
  if (here === '') return '.';
  if (!here.startsWith('..') && !path.isAbsolute(here)) return here;
  const home = os.homedir();
  return file.startsWith(home + path.sep) ? `~${file.slice(home.length)}` : file;
}

/** How the user runs the CLI: `toolshift` once installed as a package, `npx toolshift` in a checkout. */
function cliCommand(): string {
  return installationDir().split(path.sep).includes('node_modules') ? 'toolshift' : 'npx toolshift';
}

/** Where `npm start` can be reached, for its ready line. */
export interface ReadyAt {
  agent: string;
  gateway: string;
  /** The web console (a one-time login link when there are tokens). */
  console?: string;
}

/**
 * `npm start`'s one line once everything listens: where to call (the agent API, the MCP endpoint for clients,
 * the console when there is one), where the tokens are, and the command to try next.
 */
export function readyLine(at: ReadyAt, config: Config): string {
  const where = [
    `agent API ${at.agent}`,
    `MCP endpoint ${at.gateway}/mcp`,
    ...(at.console ? [`console ${at.console}`] : []),
  ].join(', ');
  const auth =
    config.auth.mode === 'none'
      ? 'no tokens (TOOLSHIFT_AUTH=none: open to every process on this machine)'
      : `credentials in ${shortPath(config.auth.credentialsFile)}`;
  // Which database holds the tasks and sessions: the embedded SQLite, or PostgreSQL's host and database name.
  const data = config.databaseUrl
    ? `data in ${shortPath(config.dataDir)}, database ${describeDatabase(config.databaseUrl, config.dataDir)}`
    : `data in ${shortPath(config.dataDir)} (SQLite)`;
  const files = `${data}, files in ${config.tools.roots.map(shortPath).join(':')}`;
  // The model and the API spoken to it, once an endpoint is configured (AGENT_PROVIDER).
  const m = config.agent.model;
  const model = m.apiKey || m.baseURL ? `model ${m.name} (${m.provider}); ` : '';
  return `toolshift ready: ${where}; ${model}${files}; ${auth}; next: ${cliCommand()} toolsets\n`;
}
