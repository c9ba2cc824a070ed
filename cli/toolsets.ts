import type { Config } from '../lib/config/config.ts';
import { callRoute, type ServiceEndpoint } from '../lib/http/http-client.ts';
import { gatewayRoutes } from '../mcp-gateway/contract.ts';
import { type CliIo, UsageError } from './io.ts';

// `toolshift toolsets`: the catalog, the user's default toolsets, one session's, the operator's enable and
// disable, and the upstream servers' import, reload and approval.

/** The flags `toolsets` reads. */
export interface ToolsetsFlags {
  json?: boolean;
  session?: string;
  query?: string;
  force?: boolean;
  'no-connect'?: boolean;
  'allow-var'?: string[];
}

/** Runs `toolshift toolsets …`; resolves to the exit code. */
export async function toolsetsCommand(
  args: string[],
  values: ToolsetsFlags,
  gateway: ServiceEndpoint,
  io: CliIo,
  config: Config,
): Promise<number> {
  const [sub = 'list', ...ids] = args;
  if (sub === 'import' || sub === 'reload' || sub === 'approve') {
    return upstreamCommand(sub, ids, values, gateway, io, config);
  }
  if (sub === 'list') return listToolsets(values, gateway, io);
  const actions = {
    activate: 'ACTIVATE',
    deactivate: 'DEACTIVATE',
    enable: 'ENABLE',
    disable: 'DISABLE',
  } as const;
  const action = actions[sub as keyof typeof actions];
  if (!action)
    throw new UsageError(
      `unknown toolsets command "${sub}"; use list, activate, deactivate, enable, disable, import, reload or approve`,
      'toolsets',
    );
  if (ids.length === 0) throw new UsageError(`toolsets ${sub} needs at least one toolset id`, 'toolsets');
  if (action === 'ENABLE' || action === 'DISABLE') return changeEnabled(action, ids, values, gateway, io);
  // No session named: the user's defaults, which every new task (each run is a new session) starts with.
  if (values.session === undefined) return changeDefaults(action, ids, values, gateway, io);
  return changeSession(action, ids, values, gateway, io);
}

/** `toolsets list`: the catalog, as new tasks start with it or as one session has it. */
async function listToolsets(values: ToolsetsFlags, gateway: ServiceEndpoint, io: CliIo): Promise<number> {
  const res = await callRoute(gateway, gatewayRoutes.listToolsets, {
    query: { session_id: values.session, query: values.query },
  });
  if (values.json) {
    io.stdout(`${JSON.stringify(res)}\n`);
    return 0;
  }
  if (values.query && res.toolsets.length === 0) {
    io.stdout(`no toolset matches "${values.query}"; toolshift toolsets lists them all\n`);
    return 1;
  }
  // Without --session the listing is about what new tasks start with; with one, about that session.
  const inSession = values.session !== undefined;
  io.stdout(
    inSession
      ? `session ${res.session_id} (active: what its next step offers the model)\n`
      : 'default: what every new task and MCP session starts with (toolshift toolsets activate|deactivate ID)\n',
  );
  for (const t of res.toolsets) {
    const state = [
      inSession ? (t.active ? 'active' : 'inactive') : t.default ? 'default' : '',
      t.enabled ? '' : 'DISABLED',
    ]
      .filter(Boolean)
      .join(', ');
    const health = t.health === 'down' || t.health === 'error' ? ` [${t.health}: ${t.health_reason}]` : '';
    const held = t.withheld?.length ? ` [${t.withheld.length} withheld until approved]` : '';
    const count =
      t.health === 'idle' && t.tools.length === 0 ? 'tools on first use' : `${t.tools.length} tools`;
    io.stdout(
      `${t.id.padEnd(24)} ${state.padEnd(18)} ${count.padEnd(18)} ${t.description}${health}${held}\n`,
    );
    if (t.matched_tools?.length) io.stdout(`${''.padEnd(25)}matched: ${t.matched_tools.join(', ')}\n`);
  }
  return 0;
}

/** `toolsets enable|disable`: the operator's switch, for every task and MCP client. */
async function changeEnabled(
  action: 'ENABLE' | 'DISABLE',
  ids: string[],
  values: ToolsetsFlags,
  gateway: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const res = await callRoute(gateway, gatewayRoutes.changeToolsets, {
    body: { action, toolset_ids: ids },
  });
  if (values.json) io.stdout(`${JSON.stringify(res)}\n`);
  else {
    const changed = ids.filter((id) => !res.unchanged.includes(id));
    if (changed.length > 0) {
      io.stdout(
        action === 'DISABLE'
          ? `disabled ${changed.join(', ')}: no task or MCP client can use it, and every session lost it\n`
          : `enabled ${changed.join(', ')}: tasks and MCP clients may activate it again\n`,
      );
    }
    if (res.unchanged.length > 0) {
      io.stdout(`already ${action === 'DISABLE' ? 'disabled' : 'enabled'}: ${res.unchanged.join(', ')}\n`);
    }
  }
  return 0;
}

/** `toolsets activate|deactivate` without a session: the user's defaults. */
async function changeDefaults(
  action: 'ACTIVATE' | 'DEACTIVATE',
  ids: string[],
  values: ToolsetsFlags,
  gateway: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const res = await callRoute(gateway, gatewayRoutes.changeDefaults, {
    body: { action, toolset_ids: ids },
  });
  if (values.json) {
    io.stdout(`${JSON.stringify(res)}\n`);
    return 0;
  }
  const verb = action === 'ACTIVATE' ? 'added to' : 'removed from';
  const changed = ids.filter((id) => !res.unchanged.includes(id));
  if (changed.length > 0) io.stdout(`${changed.join(', ')} ${verb} the default toolsets\n`);
  if (res.unchanged.length > 0) io.stdout(`unchanged: ${res.unchanged.join(', ')}\n`);
  io.stdout(
    `new tasks and MCP sessions start with: ${res.default_toolsets.join(', ') || 'none'}\n` +
      '  (a session that has changed its toolsets keeps them; change one with --session ID)\n',
  );
  return 0;
}

/** `toolsets activate|deactivate --session ID`: one session's toolsets. */
async function changeSession(
  action: 'ACTIVATE' | 'DEACTIVATE',
  ids: string[],
  values: ToolsetsFlags,
  gateway: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const res = await callRoute(gateway, gatewayRoutes.changeToolsets, {
    body: { action, toolset_ids: ids, session_id: values.session },
  });
  if (values.json) {
    io.stdout(`${JSON.stringify(res)}\n`);
    return 0;
  }
  io.stdout(`session ${res.session_id}: active toolsets: ${res.active_toolsets.join(', ') || 'none'}\n`);
  if (res.added_tools.length > 0) io.stdout(`added tools: ${res.added_tools.join(', ')}\n`);
  if (res.removed_tools.length > 0) io.stdout(`removed tools: ${res.removed_tools.join(', ')}\n`);
  if (res.unchanged.length > 0) io.stdout(`unchanged: ${res.unchanged.join(', ')}\n`);
  io.stdout(`run in this session: toolshift run --session ${res.session_id} "<goal>"\n`);
  return 0;
}

/** import (local: writes toolset files), reload and approve (the gateway's admin API). */
async function upstreamCommand(
  sub: 'import' | 'reload' | 'approve',
  args: string[],
  values: ToolsetsFlags,
  gateway: ServiceEndpoint,
  io: CliIo,
  config: Config,
): Promise<number> {
  if (sub === 'reload') return reloadToolsets(gateway, io);
  if (sub === 'approve') return approveWithheld(args, gateway, io);
  return importToolsets(args, values, io, config);
}

/** `toolsets reload`: the gateway reads the toolset files and the policy again. */
async function reloadToolsets(gateway: ServiceEndpoint, io: CliIo): Promise<number> {
  const res = await callRoute(gateway, gatewayRoutes.reloadToolsets);
  for (const key of ['added', 'removed', 'changed'] as const) {
    if (res[key].length > 0) io.stdout(`${key}: ${res[key].join(', ')}\n`);
  }
  io.stdout(`unchanged: ${res.unchanged.length} toolset(s)\n`);
  if (res.added.length + res.changed.length > 0) {
    io.stdout('upstream servers start on first use (toolshift toolsets activate ID), not now\n');
  }
  io.stdout(`policy: ${res.policy}\n`);
  for (const w of res.warnings) io.stderr(`warning: ${w}\n`);
  return 0;
}

/** `toolsets approve ID [TOOL…]`: shows the withheld definitions and releases what was shown. */
async function approveWithheld(args: string[], gateway: ServiceEndpoint, io: CliIo): Promise<number> {
  const [id, ...names] = args;
  if (!id) throw new UsageError('toolsets approve needs a toolset id (and optionally tool names)');
  // The approval binds to what is shown here: each definition's hash goes with its name, so a server that
  // swaps a definition after this listing gets nothing released.
  const listing = await callRoute(gateway, gatewayRoutes.listToolsets, { query: {} });
  const toolset = listing.toolsets.find((t) => t.id === id);
  if (!toolset) {
    throw new UsageError(`unknown toolset ${id}; toolsets: ${listing.toolsets.map((t) => t.id).join(', ')}`);
  }
  const withheld = (toolset.withheld ?? []).filter((w) => names.length === 0 || names.includes(w.name));
  const missing = names.filter((n) => !withheld.some((w) => w.name === n));
  if (missing.length > 0) {
    const held = (toolset.withheld ?? []).map((w) => w.name).join(', ') || 'none';
    throw new UsageError(`not withheld in ${id}: ${missing.join(', ')}; withheld: ${held}`);
  }
  if (withheld.length === 0) {
    io.stdout(`nothing withheld in ${id}\n`);
    return 0;
  }
  for (const w of withheld) {
    io.stdout(`${w.status} tool ${w.name} (hash ${w.hash.slice(0, 12)}):\n`);
    io.stdout(`${w.diff ?? `${JSON.stringify(w.definition, null, 2)}\n`}\n`);
  }
  const res = await callRoute(gateway, gatewayRoutes.approveToolset, {
    params: { id },
    body: { tools: withheld.map((w) => ({ name: w.name, hash: w.hash })) },
  });
  io.stdout(`approved in ${id}, as shown above: ${res.approved.join(', ')}\n`);
  for (const c of res.changed_since_shown) {
    io.stderr(
      `not approved: ${c.name} changed since it was shown; run this again to review the new definition\n`,
    );
  }
  return res.changed_since_shown.length > 0 ? 1 : 0;
}

/** `toolsets import FILE`: the user's MCP servers as toolset files (local, not the gateway's API). */
async function importToolsets(
  args: string[],
  values: ToolsetsFlags,
  io: CliIo,
  config: Config,
): Promise<number> {
  const [file] = args;
  if (!file) throw new UsageError('toolsets import needs a file, e.g. claude_desktop_config.json');
  // Loaded on use: it brings the MCP client, which the other commands do not need.
  const { importServers } = await import('../mcp-gateway/import/servers.ts');
  // Into the user's toolsets directory, never the shipped one the project's tests and lint read.
  const outcomes = await importServers({
    file,
    toolsetsDir: config.gateway.userToolsetsDir,
    shippedDir: config.gateway.toolsetsDir,
    force: values.force,
    connect: !values['no-connect'],
    env: io.env,
    allowVars: values['allow-var'],
  });
  for (const o of outcomes) {
    if (o.status === 'skipped') {
      io.stderr(`skipped ${o.name}: ${o.note}\n`);
      continue;
    }
    io.stdout(
      `wrote ${o.file} (toolset ${o.id}, tools offered as ${o.prefix}<tool>${o.described ? ', described by the server' : ''})\n`,
    );
    if (o.declared.length > 0) io.stdout(`  the toolset declares the variables: ${o.declared.join(', ')}\n`);
    if (o.variables.length > 0) io.stdout(`  set in the gateway's environment: ${o.variables.join(', ')}\n`);
    if (o.settings.length > 0) {
      io.stderr(
        `  warning: it sends toolshift's own ${o.settings.join(', ')} to this server (allow_toolshift_settings in ${o.file})\n`,
      );
    }
    if (o.note) io.stderr(`  improve the description: ${o.note}\n`);
  }
  if (outcomes.some((o) => o.status === 'written')) {
    io.stdout(
      `Your toolsets live in ${config.gateway.userToolsetsDir} (USER_TOOLSETS_DIR), apart from the shipped ones.\n` +
        'Load them with: toolshift toolsets reload (each server starts on its first use)\n',
    );
  }
  return outcomes.every((o) => o.status === 'written') ? 0 : 1;
}
