import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { agentRoutes, type ExecuteTaskResponse, type TaskEvent } from './agent-server/contract.ts';
import { type Config, loadConfig, readEnv } from './lib/config.ts';
import { callRoute, type ServiceEndpoint, ServiceError } from './lib/http-client.ts';
import { gatewayRoutes } from './mcp-gateway/contract.ts';
import { importServers } from './mcp-gateway/import-servers.ts';

// The toolshift CLI: a thin client of the agent-server and the gateway's admin API. No business logic here.

const HELP = `toolshift — run tasks and manage toolsets

Usage:
  toolshift run "<goal>" [--session ID] [--max-steps N] [--quiet]
  toolshift toolsets [list] [--session ID] [--query WORDS]
  toolshift toolsets activate|deactivate <toolset_id>... [--session ID]
  toolshift toolsets enable|disable <toolset_id>...
  toolshift toolsets import <mcpServers.json> [--force] [--no-connect]
  toolshift toolsets reload
  toolshift toolsets approve <toolset_id> [tool...]
  toolshift tasks [--limit N]
  toolshift tasks show <task_id>
  toolshift --help

Environment (also read from .env):
  AGENT_URL            agent-server (default http://127.0.0.1:$AGENT_PORT, port 8000)
  GATEWAY_URL          mcp-gateway (default http://127.0.0.1:$GATEWAY_PORT, port 8080)
  AGENT_API_TOKEN      sent to the agent-server when set (it needs it when it has one)
  GATEWAY_ADMIN_TOKEN  sent to the gateway when set (the operator's token)
`;

/** Where the CLI writes and what it reaches; tests pass their own. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: Record<string, string | undefined>;
  fetch?: (input: string, init?: RequestInit) => Promise<Response>;
}

class UsageError extends Error {}

/** Runs the CLI with `argv` (without node and script); resolves to the exit code. */
export async function main(argv: string[], io: CliIo): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    io.stderr(`error: ${(err as Error).message}\nRun with --help for usage.\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    io.stdout(HELP);
    return positionals.length === 0 && !values.help ? 2 : 0;
  }
  let config: Config;
  try {
    config = loadConfig(io.env);
  } catch (err) {
    io.stderr(`error: ${(err as Error).message}\n`);
    return 2;
  }
  const bearer = (token: string | undefined) => (token ? { authorization: `Bearer ${token}` } : undefined);
  const agent: ServiceEndpoint = {
    baseUrl: config.agent.url,
    fetch: io.fetch,
    headers: bearer(config.agent.apiToken),
  };
  const gateway: ServiceEndpoint = {
    baseUrl: config.gateway.url,
    fetch: io.fetch,
    headers: bearer(config.gateway.adminToken),
  };
  const [command, ...rest] = positionals;
  try {
    switch (command) {
      case 'run':
        return await runTask(rest, values, agent, io);
      case 'toolsets':
        return await toolsets(rest, values, gateway, io, config);
      case 'tasks':
        return await tasks(rest, values, agent, io);
      default:
        throw new UsageError(`unknown command "${command}"; commands: run, toolsets, tasks`);
    }
  } catch (err) {
    const hint =
      err instanceof UsageError
        ? '\nRun with --help for usage.'
        : err instanceof ServiceError && (err.status === 401 || err.status === 403)
          ? `\n${credentialHint(command, err.status)}`
          : '';
    io.stderr(`error: ${(err as Error).message}${hint}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
}

/** Which variable a refused request needs, by the service the command talks to. */
function credentialHint(command: string, status: number): string {
  const variable = command === 'toolsets' ? 'GATEWAY_ADMIN_TOKEN' : 'AGENT_API_TOKEN';
  return status === 401
    ? `Set ${variable} (in the environment or .env) to the value the server was started with.`
    : `The credential in ${variable} is not allowed to do this.`;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      session: { type: 'string', short: 's' },
      'max-steps': { type: 'string' },
      query: { type: 'string', short: 'q' },
      limit: { type: 'string' },
      quiet: { type: 'boolean' },
      force: { type: 'boolean' },
      'no-connect': { type: 'boolean' },
    },
  });
}

type Values = ReturnType<typeof parse>['values'];

function positiveInt(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`${flag} must be a positive whole number, got "${value}"`);
  return n;
}

/** One line of live progress for an event. */
function progressLine(e: TaskEvent): string | undefined {
  const d = e.data as Record<string, unknown>;
  const ms = e.duration_ms === null ? '' : ` (${Math.round(e.duration_ms)} ms)`;
  switch (e.type) {
    case 'task_started':
      return `task ${d.task_id} in session ${d.session_id}`;
    case 'model_call': {
      const calls = (d.tool_calls as { name: string }[]).map((c) => c.name);
      return `step ${d.step}: model${ms} → ${calls.length > 0 ? calls.join(', ') : 'answer'}`;
    }
    case 'toolset_change': {
      const added = (d.added_tools as string[]).length;
      const removed = (d.removed_tools as string[]).length;
      return `  ${String(d.action).toLowerCase()} ${(d.toolset_ids as string[]).join(', ')}: +${added} −${removed} tools`;
    }
    case 'tool_call':
      return `  ${d.name} ${d.ok ? 'ok' : 'failed'}${ms}${d.ok ? '' : `: ${String(d.output).slice(0, 200)}`}`;
    default:
      return undefined;
  }
}

async function runTask(args: string[], values: Values, agent: ServiceEndpoint, io: CliIo): Promise<number> {
  const goal = args.join(' ').trim();
  if (!goal) throw new UsageError('run needs a goal, e.g. toolshift run "list the files in the workspace"');
  const body = {
    goal,
    session_id: values.session,
    max_steps: positiveInt(values['max-steps'], '--max-steps'),
  };
  const doFetch = agent.fetch ?? fetch;
  let res: Response;
  try {
    res = await doFetch(`${agent.baseUrl.replace(/\/$/, '')}${agentRoutes.executeTask.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...agent.headers },
      body: JSON.stringify(body),
    });
  } catch (err) {
    throw new Error(`cannot reach the agent-server at ${agent.baseUrl}: ${(err as Error).message}`);
  }
  if (!res.ok || !res.body) {
    const text = await res.text();
    let message = text;
    try {
      message = JSON.parse(text).error ?? text;
    } catch {}
    throw new ServiceError(res.status, `agent-server answered ${res.status}: ${message}`, text);
  }
  let result: ExecuteTaskResponse | undefined;
  const events = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  for await (const message of events) {
    if (message.event === 'result') {
      result = JSON.parse(message.data);
    } else if (!values.quiet) {
      const line = progressLine(JSON.parse(message.data));
      if (line) io.stderr(`${line}\n`);
    }
  }
  if (!result) throw new Error('the agent-server closed the stream before the task ended');
  if (result.final_answer) io.stdout(`${result.final_answer}\n`);
  const used = result.toolsets_used.length > 0 ? result.toolsets_used.join(', ') : 'none';
  io.stdout(
    `— ${result.status} in ${result.steps} step${result.steps === 1 ? '' : 's'} · toolsets used: ${used} · ` +
      `${result.usage.total_tokens} tokens · task ${result.task_id} · session ${result.session_id}\n`,
  );
  if (result.error) io.stderr(`error: ${result.error}\n`);
  return result.status === 'completed' ? 0 : 1;
}

async function toolsets(
  args: string[],
  values: Values,
  gateway: ServiceEndpoint,
  io: CliIo,
  config: Config,
): Promise<number> {
  const [sub = 'list', ...ids] = args;
  if (sub === 'import' || sub === 'reload' || sub === 'approve') {
    return upstreamCommand(sub, ids, values, gateway, io, config);
  }
  if (sub === 'list') {
    const res = await callRoute(gateway, gatewayRoutes.listToolsets, {
      query: { session_id: values.session, query: values.query },
    });
    io.stdout(`session ${res.session_id}\n`);
    for (const t of res.toolsets) {
      const state = [
        t.active ? 'active' : 'inactive',
        t.enabled ? '' : 'DISABLED',
        t.default ? 'default' : '',
      ]
        .filter(Boolean)
        .join(', ');
      const health = t.health === 'down' || t.health === 'error' ? ` [${t.health}: ${t.health_reason}]` : '';
      const held = t.withheld?.length ? ` [${t.withheld.length} withheld until approved]` : '';
      io.stdout(
        `${t.id.padEnd(24)} ${state.padEnd(26)} ${t.tools.length} tools  ${t.description}${health}${held}\n`,
      );
    }
    return 0;
  }
  const actions = {
    activate: 'ACTIVATE',
    deactivate: 'DEACTIVATE',
    enable: 'ENABLE',
    disable: 'DISABLE',
  } as const;
  const action = actions[sub as keyof typeof actions];
  if (!action)
    throw new UsageError(
      `unknown toolsets command "${sub}"; use list, activate, deactivate, enable, disable`,
    );
  if (ids.length === 0) throw new UsageError(`toolsets ${sub} needs at least one toolset id`);
  const res = await callRoute(gateway, gatewayRoutes.changeToolsets, {
    body: { action, toolset_ids: ids, session_id: values.session },
  });
  io.stdout(`session ${res.session_id}: active toolsets: ${res.active_toolsets.join(', ') || 'none'}\n`);
  if (res.added_tools.length > 0) io.stdout(`added tools: ${res.added_tools.join(', ')}\n`);
  if (res.removed_tools.length > 0) io.stdout(`removed tools: ${res.removed_tools.join(', ')}\n`);
  if (res.unchanged.length > 0) io.stdout(`unchanged: ${res.unchanged.join(', ')}\n`);
  return 0;
}

/** import (local: writes toolset files), reload and approve (the gateway's admin API). */
async function upstreamCommand(
  sub: 'import' | 'reload' | 'approve',
  args: string[],
  values: Values,
  gateway: ServiceEndpoint,
  io: CliIo,
  config: Config,
): Promise<number> {
  if (sub === 'reload') {
    const res = await callRoute(gateway, gatewayRoutes.reloadToolsets);
    for (const key of ['added', 'removed', 'changed'] as const) {
      if (res[key].length > 0) io.stdout(`${key}: ${res[key].join(', ')}\n`);
    }
    io.stdout(`unchanged: ${res.unchanged.length} toolset(s)\n`);
    for (const w of res.warnings) io.stderr(`warning: ${w}\n`);
    return 0;
  }
  if (sub === 'approve') {
    const [id, ...tools] = args;
    if (!id) throw new UsageError('toolsets approve needs a toolset id (and optionally tool names)');
    const res = await callRoute(gateway, gatewayRoutes.approveToolset, {
      params: { id },
      body: tools.length > 0 ? { tools } : undefined,
    });
    io.stdout(
      res.approved.length > 0
        ? `approved in ${id}: ${res.approved.join(', ')}\n`
        : `nothing withheld in ${id}\n`,
    );
    return 0;
  }
  const [file] = args;
  if (!file) throw new UsageError('toolsets import needs a file, e.g. claude_desktop_config.json');
  const outcomes = await importServers({
    file,
    toolsetsDir: config.gateway.toolsetsDir,
    force: values.force,
    connect: !values['no-connect'],
    env: io.env,
  });
  for (const o of outcomes) {
    if (o.status === 'skipped') {
      io.stderr(`skipped ${o.name}: ${o.note}\n`);
      continue;
    }
    io.stdout(`wrote ${o.file} (toolset ${o.id}${o.described ? ', described by the server' : ''})\n`);
    if (o.variables.length > 0) io.stdout(`  set in the gateway's environment: ${o.variables.join(', ')}\n`);
    if (o.note) io.stderr(`  improve the description: ${o.note}\n`);
  }
  if (outcomes.some((o) => o.status === 'written')) io.stdout('Load them with: toolshift toolsets reload\n');
  return outcomes.every((o) => o.status === 'written') ? 0 : 1;
}

async function tasks(args: string[], values: Values, agent: ServiceEndpoint, io: CliIo): Promise<number> {
  const [sub, id] = args;
  if (sub === 'show') {
    if (!id) throw new UsageError('tasks show needs a task id');
    const task = await callRoute(agent, agentRoutes.getTask, { params: { id } });
    io.stdout(`${task.task_id}  ${task.status}  session ${task.session_id}  ${task.created_at}\n`);
    io.stdout(`goal: ${task.goal}\n`);
    for (const e of task.events) {
      const line = progressLine(e);
      if (line) io.stdout(`${line}\n`);
    }
    if (task.final_answer) io.stdout(`answer: ${task.final_answer}\n`);
    if (task.error) io.stdout(`error: ${task.error}\n`);
    return 0;
  }
  if (sub !== undefined)
    throw new UsageError(`unknown tasks command "${sub}"; use "tasks" or "tasks show <id>"`);
  const limit = positiveInt(values.limit, '--limit') ?? 20;
  const { tasks: list } = await callRoute(agent, agentRoutes.listTasks, { query: { limit: String(limit) } });
  if (list.length === 0) io.stdout('no tasks yet\n');
  for (const t of list) {
    io.stdout(
      `${t.task_id}  ${t.status.padEnd(9)} ${String(t.steps).padStart(3)} steps  ${t.goal.slice(0, 60)}\n`,
    );
  }
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const code = await main(process.argv.slice(2), {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    env: readEnv(),
  });
  process.exitCode = code;
}
