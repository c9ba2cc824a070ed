import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { IfBusy, ToolExposure } from './agent-server/contract.ts';
import { approvalsCommand, auditCommand } from './cli/approvals.ts';
import { chatCommand } from './cli/chat.ts';
import { COMMAND_HELP, COMMANDS, HELP, nearest, nearestCommand } from './cli/help.ts';
import { type CliIo, EXIT, rootCause, serviceEndpoint, UnreachableError, UsageError } from './cli/io.ts';
import { keysCommand, teamsCommand, usersCommand } from './cli/people.ts';
import { processIo } from './cli/process-io.ts';
import { runTask } from './cli/run.ts';
import { connectCommand, secretsCommand } from './cli/secrets.ts';
import { checkCredentialTarget, credentialOf, type Target, type Targets, targetOf } from './cli/targets.ts';
import { tasksCommand } from './cli/tasks.ts';
import { threadsCommand } from './cli/threads.ts';
import { consoleCommand, tokenCommand } from './cli/token.ts';
import { toolsetsCommand } from './cli/toolsets.ts';
import { readAddresses } from './lib/config/addresses.ts';
import { type Config, loadConfig } from './lib/config/config.ts';
import {
  type CredentialVariable,
  storedCredentials,
  withStoredCredentials,
} from './lib/config/credentials.ts';
import { installedVersion } from './lib/config/installation.ts';
import { type ServiceEndpoint, ServiceError } from './lib/http/http-client.ts';

// The toolshift CLI: a thin client of the agent-server and the gateway's admin API. No business logic here.

export type { CliIo };

/** Runs the CLI with `argv` (without node and script); resolves to the exit code (see cli/io.ts EXIT). */
export async function main(argv: string[], io: CliIo): Promise<number> {
  const parsed = parseOrExplain(argv, io);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  const answered = helpOrVersion(command, rest, values, io);
  if (answered !== undefined) return answered;
  const setUp = setUpClient(io);
  if (typeof setUp === 'number') return setUp;
  const { config, targets } = setUp;
  io = setUp.io;
  // Each stored token goes only to where its daemon recorded it listens (cli/targets.ts).
  const endpointOf = (target: Target, variable: CredentialVariable) => {
    const credential = targets.credential(variable);
    let withheld: Error | undefined;
    try {
      checkCredentialTarget(target, credential, command);
    } catch (err) {
      withheld = err as Error;
    }
    return serviceEndpoint(target.service, target.url, credential?.value, io, withheld);
  };
  const endpoints = {
    agent: endpointOf(targets.agent, 'AGENT_API_TOKEN'),
    gateway: endpointOf(targets.gateway, 'GATEWAY_ADMIN_TOKEN'),
  };
  try {
    return await runCommand(command, rest, values, { config, targets, endpoints }, io);
  } catch (raw) {
    return failure(raw, command, config, io);
  }
}

/** The command line parsed, or the usage exit code once the error is reported. */
function parseOrExplain(argv: string[], io: CliIo): ReturnType<typeof parse> | number {
  try {
    return parse(argv);
  } catch (err) {
    // Node's parser says "Unknown option '--x'. To specify a positional argument starting with a '-', …":
    // name the option and where the valid ones are instead.
    const unknown = /Unknown option '([^']+)'/.exec((err as Error).message)?.[1];
    const topic = argv.find((a) => !a.startsWith('-') && (COMMANDS as readonly string[]).includes(a));
    const more = topic ? `toolshift help ${topic}` : 'toolshift --help';
    const meant = unknown?.startsWith('--')
      ? nearest(unknown.slice(2).split('=')[0], Object.keys(OPTIONS))
      : undefined;
    io.stderr(
      unknown
        ? `error: unknown option ${unknown}${meant ? `; did you mean --${meant}? See` : '; see'} ${more} for the options\n`
        : `error: ${(err as Error).message}\nSee: ${more}\n`,
    );
    return EXIT.usage;
  }
}

/** --version, `help [command]`, --help and no command at all: answered without a service; else undefined. */
function helpOrVersion(
  command: string | undefined,
  rest: string[],
  values: Values,
  io: CliIo,
): number | undefined {
  if (values.version) {
    io.stdout(`toolshift ${installedVersion()}\n`);
    return EXIT.ok;
  }
  if (command === 'help') {
    const topic = rest[0];
    if (topic && !COMMAND_HELP[topic]) {
      const near = nearestCommand(topic);
      io.stderr(
        `error: no help for "${topic}"${near ? `; did you mean ${near}?` : ''} commands: ${COMMANDS.join(', ')}\n`,
      );
      return EXIT.usage;
    }
    io.stdout(topic ? COMMAND_HELP[topic] : HELP);
    return EXIT.ok;
  }
  if (values.help || command === undefined) {
    io.stdout(command && COMMAND_HELP[command] ? COMMAND_HELP[command] : HELP);
    return command === undefined && !values.help ? EXIT.usage : EXIT.ok;
  }
  return undefined;
}

/** The configuration, where the services are, and the io with its reconnect window; or the usage exit code. */
function setUpClient(io: CliIo): { config: Config; targets: Targets; io: CliIo } | number {
  try {
    const fromEnv = loadConfig(io.env);
    const stored = storedCredentials(fromEnv);
    const config = withStoredCredentials(fromEnv, stored);
    const addresses = readAddresses(fromEnv.auth.credentialsFile);
    const targets = {
      agent: targetOf('agent-server', io.env, fromEnv, addresses),
      gateway: targetOf('mcp-gateway', io.env, fromEnv, addresses),
      credential: (variable: CredentialVariable) => credentialOf(variable, fromEnv, stored),
    };
    const reconnectForMs = io.reconnectForMs ?? reconnectWindow(io.env.TOOLSHIFT_RECONNECT_S);
    return { config, targets, io: { ...io, reconnectForMs } };
  } catch (err) {
    io.stderr(`error: ${(err as Error).message}\n`);
    return EXIT.usage;
  }
}

/** What a command is given: the configuration, the services' addresses and their endpoints with tokens. */
interface Context {
  config: Config;
  targets: Targets;
  endpoints: { agent: ServiceEndpoint; gateway: ServiceEndpoint };
}

/** Runs one command with its options. */
async function runCommand(
  command: string,
  rest: string[],
  values: Values,
  { config, targets, endpoints }: Context,
  io: CliIo,
): Promise<number> {
  const { agent, gateway } = endpoints;
  const watch = {
    json: values.json === true,
    quiet: values.quiet === true,
    cancelOnInterrupt: values['cancel-on-interrupt'] === true,
  };
  switch (command) {
    case 'run':
      return await runTask(rest, { ...watch, ...runOptions(values) }, agent, io);
    case 'toolsets':
      return await toolsetsCommand(rest, values, gateway, io, config);
    case 'approvals':
      return await approvalsCommand(rest, { json: watch.json, reason: values.reason }, endpoints, io);
    case 'audit':
      return await auditCommand(auditOptions(values), gateway, io);
    case 'token':
      return tokenCommand(rest, config, io);
    case 'console':
      return await consoleCommand(rest, config, targets, io);
    case 'serve':
      // bin/toolshift.js starts the daemon (start/entry.ts) before the CLI is loaded; main() alone cannot.
      throw new UsageError('serve starts the daemon: run it as `toolshift serve` (or `npm start`)');
    case 'chat':
      return await chatCommand(rest, chatOptions(values), endpoints, io);
    case 'threads':
      return await threadsCommand(
        rest,
        { json: watch.json, limit: positiveInt(values.limit, '--limit') ?? 20 },
        agent,
        io,
      );
    case 'users':
      return await usersCommand(rest, { ...values, json: watch.json }, gateway, io);
    case 'keys':
      return await keysCommand(rest, { ...values, json: watch.json }, gateway, io);
    case 'teams':
      return await teamsCommand(rest, { ...values, json: watch.json }, gateway, io);
    case 'secrets':
    case 'connect':
      return await (command === 'secrets' ? secretsCommand : connectCommand)(rest, values, endpoints, io);
    case 'tasks':
      return await tasksCommand(
        rest,
        { ...watch, limit: positiveInt(values.limit, '--limit') ?? 20 },
        agent,
        io,
      );
    default:
      throw new UsageError(
        `unknown command "${command}"${nearestCommand(command) ? `; did you mean ${nearestCommand(command)}?` : ''} ` +
          `commands: ${COMMANDS.join(', ')}`,
      );
  }
}

/** `run`'s own options. */
function runOptions(values: Values) {
  return {
    session: values.session,
    maxSteps: positiveInt(values['max-steps'], '--max-steps'),
    maxDurationS: positiveInt(values['max-duration'], '--max-duration'),
    detach: values.detach === true,
    approvals: approvalMode(values),
    prompt: values.prompt,
    promptArgs: promptArgs(values.arg),
    exposure: exposureOf(values.exposure),
    thread: values.thread,
    ifBusy: ifBusyOf(values['if-busy']),
  };
}

/** `chat`'s options: the thread to continue, or the session of new threads. */
function chatOptions(values: Values) {
  return {
    thread: values.thread,
    session: values.session,
    exposure: exposureOf(values.exposure),
    approvals: approvalMode(values),
  };
}

/** `audit`'s filters and paging. */
function auditOptions(values: Values) {
  return {
    json: values.json === true,
    jsonl: values.jsonl,
    session: values.session,
    task: values.task,
    since: values.since,
    until: values.until,
    actor: values.actor,
    kind: values.kind,
    toolset: values.toolset,
    tool: values.tool,
    outcome: values.outcome,
    cursor: values.cursor,
    limit: positiveInt(values.limit, '--limit') ?? 50,
  };
}

/** Reports a command's error and gives its exit code: usage, unreachable (or refused credential), or failed. */
function failure(raw: unknown, command: string, config: Config, io: CliIo): number {
  const err = rootCause(raw);
  if (err instanceof UsageError) {
    const more = err.command ? `toolshift help ${err.command}` : 'toolshift --help';
    io.stderr(`error: ${err.message}\nSee: ${more}\n`);
    return EXIT.usage;
  }
  if (err instanceof UnreachableError) {
    io.stderr(`error: ${err.message}\n`);
    return EXIT.unreachable;
  }
  // A 403 of the credential (it lacks the role) points at the tokens; another 403 (a toolset the operator
  // disabled, a policy's deny) is the request's own refusal.
  const wrongRole = err instanceof ServiceError && err.status === 403 && hasRequiredRoles(err.body);
  if (err instanceof ServiceError && (err.status === 401 || wrongRole)) {
    io.stderr(`error: ${err.message}\n${credentialHint(command, err.status, config)}\n`);
    return EXIT.unreachable;
  }
  io.stderr(`error: ${(err as Error).message}\n`);
  return EXIT.failed;
}

/** TOOLSHIFT_RECONNECT_S: how long run/watch wait for a daemon that went away mid-task (default 60). */
function reconnectWindow(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const s = Number(value);
  if (!Number.isFinite(s) || s < 0 || s > 86400) {
    throw new Error(`TOOLSHIFT_RECONNECT_S must be a number of seconds from 0 to 86400, got "${value}"`);
  }
  return s * 1000;
}

function hasRequiredRoles(body: unknown): boolean {
  return typeof body === 'object' && body !== null && 'required_roles' in body;
}

/** Which variable a refused request needs, by the service the command talks to, and where it comes from. */
function credentialHint(command: string, status: number, config: Config): string {
  const variable = ['toolsets', 'audit', 'users', 'keys', 'teams'].includes(command)
    ? 'GATEWAY_ADMIN_TOKEN'
    : 'AGENT_API_TOKEN';
  return status === 401
    ? `The CLI takes ${variable} from the environment, else from ${config.auth.credentialsFile} ` +
        '(written by the daemon at its first start): set TOOLSHIFT_DATA_DIR to the data directory of the daemon ' +
        `you started, or set ${variable} to the value the server was started with.`
    : `The credential in ${variable} is not allowed to do this.`;
}

const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  session: { type: 'string', short: 's' },
  'max-steps': { type: 'string' },
  query: { type: 'string' },
  limit: { type: 'string' },
  quiet: { type: 'boolean', short: 'q' },
  json: { type: 'boolean' },
  version: { type: 'boolean', short: 'V' },
  'max-duration': { type: 'string' },
  detach: { type: 'boolean' },
  'cancel-on-interrupt': { type: 'boolean' },
  force: { type: 'boolean' },
  'no-connect': { type: 'boolean' },
  'allow-var': { type: 'string', multiple: true },
  'approve-all': { type: 'boolean' },
  'deny-all': { type: 'boolean' },
  reason: { type: 'string' },
  task: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  actor: { type: 'string' },
  kind: { type: 'string' },
  toolset: { type: 'string' },
  tool: { type: 'string' },
  outcome: { type: 'string' },
  jsonl: { type: 'boolean' },
  cursor: { type: 'string' },
  prompt: { type: 'string' },
  arg: { type: 'string', multiple: true },
  exposure: { type: 'string' },
  thread: { type: 'string' },
  'if-busy': { type: 'string' },
  email: { type: 'string' },
  team: { type: 'string', multiple: true },
  user: { type: 'string' },
  role: { type: 'string' },
  expires: { type: 'string' },
  label: { type: 'string' },
  'tasks-per-hour': { type: 'string' },
  revoke: { type: 'boolean' },
  'tokens-per-day': { type: 'string' },
  'tool-calls-per-minute': { type: 'string' },
} as const;

function parse(argv: string[]) {
  return parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
}

type Values = ReturnType<typeof parse>['values'];

/** How `run` answers approvals: ask on a terminal, or all yes / all no for scripts. */
function approvalMode(values: Values): 'ask' | 'approve' | 'deny' {
  if (values['approve-all'] && values['deny-all']) {
    throw new UsageError('give --approve-all or --deny-all, not both', 'run');
  }
  return values['approve-all'] ? 'approve' : values['deny-all'] ? 'deny' : 'ask';
}

/** `--arg key=value` (repeatable) as a playbook's arguments. */
function promptArgs(pairs: string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs ?? []) {
    const eq = pair.indexOf('=');
    if (eq < 1) throw new UsageError(`--arg takes key=value, got "${pair}"`, 'run');
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

/** `--exposure`: how the task's model sees the tools (auto, native, dispatch or code). */
function exposureOf(value: string | undefined): ToolExposure | undefined {
  const parsed = ToolExposure.optional().safeParse(value);
  if (parsed.success) return parsed.data;
  throw new UsageError(
    `--exposure must be auto (all tools for a small catalog, else native), native (the tools array follows the active toolsets), dispatch (a fixed [manage_toolsets, call_tool], kind to prompt caches) or code (the model writes scripts against its tools), got "${value}"`,
    'run',
  );
}

/** `--if-busy`: what a goal sent to a thread whose task still runs does. */
function ifBusyOf(value: string | undefined): IfBusy | undefined {
  const parsed = IfBusy.optional().safeParse(value);
  if (parsed.success) return parsed.data;
  throw new UsageError(
    `--if-busy must be enqueue (wait for the thread's running task), reject or interrupt (cancel it), got "${value}"`,
    'run',
  );
}
function positiveInt(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`${flag} must be a positive whole number, got "${value}"`);
  return n;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2), processIo());
}
