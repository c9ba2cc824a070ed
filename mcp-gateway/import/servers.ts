import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Document } from 'yaml';
import { z } from 'zod';
import { readConfigText, readYamlFile, YamlFileError } from '../../lib/config/yaml-file.ts';
import { describeIssues } from '../../lib/http/issues.ts';
import { createLogger } from '../../lib/telemetry/log.ts';
import { McpConnection, type McpServerSpec } from '../backends/mcp-connection.ts';
import { Redactor } from '../backends/redactor.ts';
import { defaultPrefix, resolveCommand } from '../catalog/toolset-files.ts';
import { EnvName } from '../catalog/toolset-schema.ts';
import { allowedReferences, secretReferences } from './secrets.ts';

// `toolshift toolsets import <file>`: the `mcpServers` JSON of desktop and IDE MCP clients becomes one
// toolset file per server, in the user's toolsets directory (never the shipped one). Each server is started
// (or reached) once to describe it from its own instructions and tool list, unless --no-connect; secret
// values become `${VAR}` references and are never written or printed. Every file gets `prefix: <id>_`, so
// the server's tools are offered as `<id>_<tool>` and never collide with toolshift's own or another's.
// A `${VAR}` the file already has is refused unless allowed by name, and every file declares the variables
// it uses, so the gateway fills those and no others.

const Stdio = z
  .looseObject({
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().optional(),
  })
  .transform(({ command, args, env, cwd }) => ({ kind: 'stdio' as const, command, args, env, cwd }));
const Http = z
  .looseObject({
    url: z.string().min(1),
    headers: z.record(z.string(), z.string()).default({}),
    type: z.string().optional(),
  })
  .transform(({ url, headers, type }) => ({ kind: 'http' as const, url, headers, type }));
const Server = z.union([Stdio, Http]);
const Config = z.looseObject({ mcpServers: z.record(z.string(), Server) });
type ServerEntry = z.infer<typeof Server>;

/** What happened to one server of the file. */
export interface ImportOutcome {
  name: string;
  id: string;
  file: string;
  status: 'written' | 'skipped';
  /** Why a server was skipped, or what to improve in a written file. */
  note?: string;
  /** True when the description came from the server itself, false when it had to be made from the config. */
  described: boolean;
  /** Variables the gateway's environment must provide (values never shown). */
  variables: string[];
  /** Everything the file declares it may expand (`variables`, then `allow_toolshift_settings`). */
  declared: string[];
  /** toolshift's own settings the file sends to its server (allowed with --allow-var). */
  settings: string[];
  /** The tools' prefix in the gateway (`<id>_`): the server's tool `x` is offered as `<id>_x`. */
  prefix: string;
}

/** What an import needs: the file, where toolsets live, and whether to overwrite or connect. */
export interface ImportOptions {
  file: string;
  /** Where the files are written: the user's toolsets directory (created if missing). */
  toolsetsDir: string;
  /** The shipped toolsets: an id they use is not taken without --force (the user's file would replace it). */
  shippedDir?: string;
  force?: boolean;
  connect?: boolean;
  connectTimeoutMs?: number;
  /** The environment the servers are started with for describing them (PATH, HOME). */
  env?: Record<string, string | undefined>;
  /** `${VAR}` references of the file (not made by the import) the gateway may fill: --allow-var NAME. */
  allowVars?: string[];
}

/** A toolset id from a server's name: lower case, `_` for anything else, at most 64 characters. */
export function toolsetId(name: string): string {
  const id = name
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 64);
  return id || 'server';
}

/** The ids already declared in the toolsets directory, by file. */
function existingIds(dir: string): Map<string, string> {
  const ids = new Map<string, string>();
  if (!existsSync(dir)) return ids;
  for (const name of readdirSync(dir).filter((f) => /\.ya?ml$/.test(f))) {
    // A file that does not parse claims no id (the gateway skips it, naming it, when it loads).
    try {
      const id = (readYamlFile(path.join(dir, name)).value as { id?: unknown } | null)?.id;
      if (typeof id === 'string') ids.set(id, name);
    } catch {}
  }
  return ids;
}

/** A description from what the server says about itself, or undefined when it could not be reached. */
async function describe(
  spec: McpServerSpec,
  label: string,
  timeoutMs: number,
): Promise<string | { error: string }> {
  const conn = new McpConnection(label, spec, {
    log: createLogger('import', 'silent'),
    redactor: new Redactor({}),
    connectTimeoutMs: timeoutMs,
  });
  try {
    const tools = await conn.listTools();
    const who = conn.identity();
    const intro = (who.instructions ?? '')
      .split(/\n\s*\n/)[0]
      .replace(/\s+/g, ' ')
      .trim();
    const head = intro && !intro.startsWith('#') ? intro : (who.title ?? who.name ?? label);
    const names = tools.map((t) => t.name);
    const listed =
      names.slice(0, 12).join(', ') + (names.length > 12 ? `, and ${names.length - 12} more` : '');
    const sentence = head.length > 300 ? `${head.slice(0, 297)}...` : head;
    return `${sentence.replace(/[.\s]*$/, '')}. Tools: ${listed || 'none listed'}.`;
  } catch (err) {
    return { error: (err as Error).message };
  } finally {
    await conn.close();
  }
}

/** Reads an `mcpServers` file and writes one toolset file per server; never overwrites without `force`. */
export async function importServers(opts: ImportOptions): Promise<ImportOutcome[]> {
  const servers = readServers(opts);
  // Before anything is contacted or written.
  const foreign = allowedReferences(opts.file, servers, opts.allowVars ?? []);
  const apart = opts.shippedDir && path.resolve(opts.shippedDir) !== path.resolve(opts.toolsetsDir);
  const run: ImportRun = {
    opts,
    env: opts.env ?? process.env,
    foreign,
    taken: existingIds(opts.toolsetsDir),
    shipped: apart ? existingIds(opts.shippedDir as string) : new Map<string, string>(),
    claimed: new Map<string, string>(),
  };
  const used = new Set<string>();
  const outcomes: ImportOutcome[] = [];
  for (const [name, server] of Object.entries(servers)) {
    let id = toolsetId(name);
    for (let n = 2; used.has(id); n++) id = `${toolsetId(name).slice(0, 60)}_${n}`;
    used.add(id);
    const file = path.join(opts.toolsetsDir, `${id}.yaml`);
    const base = {
      name,
      id,
      file,
      prefix: defaultPrefix(id),
      described: false,
      variables: [] as string[],
      declared: [] as string[],
      settings: [] as string[],
    };
    const skipped = skipReason(run, id, file, server);
    outcomes.push(
      skipped ? { ...base, status: 'skipped', note: skipped } : await importOne(run, server, base),
    );
  }
  return outcomes;
}

/** What an import of one file shares between its servers. */
interface ImportRun {
  opts: ImportOptions;
  env: Record<string, string | undefined>;
  /** The `${VAR}` references of the file the gateway may fill, by server (secrets.ts allowedReferences). */
  foreign: Map<string, { variables: string[]; settings: string[] }>;
  /** The ids in the user's toolsets directory, and in the shipped one, by file. */
  taken: Map<string, string>;
  shipped: Map<string, string>;
  /** The variables named so far, by secret value (secrets.ts secretReferences). */
  claimed: Map<string, string>;
}

/** The file's servers, checked, and the --allow-var names. */
function readServers(opts: ImportOptions): Record<string, ServerEntry> {
  let raw: unknown;
  try {
    raw = JSON.parse(readConfigText(opts.file));
  } catch (err) {
    if (err instanceof YamlFileError) throw new Error(err.message);
    throw new Error(`${opts.file}: not a readable JSON file: ${(err as Error).message}`);
  }
  const parsed = Config.safeParse(raw);
  if (!parsed.success) {
    throw new Error(
      `${opts.file}: expected {"mcpServers": {"name": {"command", "args", "env"} | {"url", "headers"}}}: ${describeIssues(parsed.error)}`,
    );
  }
  for (const name of opts.allowVars ?? []) {
    if (!EnvName.safeParse(name).success) {
      throw new Error(`--allow-var ${name}: not a variable name; give one like MY_SERVICE_URL`);
    }
  }
  return parsed.data.mcpServers;
}

/** Why a server's file is not written (its id taken, its file there, a transport not spoken); else undefined. */
function skipReason(run: ImportRun, id: string, file: string, server: ServerEntry): string | undefined {
  const { opts } = run;
  const owner = run.taken.get(id);
  if (owner && owner !== `${id}.yaml` && !opts.force) return `toolset id ${id} is already used by ${owner}`;
  const builtIn = run.shipped.get(id);
  if (builtIn && !opts.force) {
    const shippedFile = path.join(opts.shippedDir as string, builtIn);
    return `toolset id ${id} is shipped with toolshift (${shippedFile}); rename the server in ${path.basename(opts.file)}, or use --force to write ${file}, which then replaces the shipped toolset`;
  }
  if (existsSync(file) && !opts.force) return `${file} exists; use --force to overwrite it`;
  if (server.kind === 'http' && server.type === 'sse') {
    return 'it uses the older HTTP+SSE transport; toolshift speaks Streamable HTTP (give its Streamable HTTP URL)';
  }
  return undefined;
}

/** Describes one server (unless --no-connect) and writes its toolset file, secrets as `${VAR}` references. */
async function importOne(
  run: ImportRun,
  server: ServerEntry,
  base: Omit<ImportOutcome, 'status'>,
): Promise<ImportOutcome> {
  const { opts, env } = run;
  const { name, id, file } = base;
  const refs = secretReferences(id, server, run.claimed);
  const literal: McpServerSpec =
    server.kind === 'stdio'
      ? {
          transport: 'stdio',
          command: resolveCommand(server.command, path.dirname(opts.file)),
          args: server.args,
          env: { PATH: env.PATH ?? '', HOME: env.HOME ?? '', ...server.env },
          cwd: server.cwd,
          protocol: 'legacy',
        }
      : { transport: 'http', url: server.url, headers: server.headers, protocol: 'auto' };
  const label = server.kind === 'stdio' ? [server.command, ...server.args].join(' ') : String(refs.block.url);
  const described =
    opts.connect === false
      ? { error: 'not contacted (--no-connect)' }
      : await describe(literal, String(label), opts.connectTimeoutMs ?? 15_000);
  const description =
    typeof described === 'string'
      ? refs.redact(described)
      : `The MCP server "${name}" (${refs.redact(String(label))}). Replace this with what it is for, so discovery can find it.`;
  const kept = run.foreign.get(name) ?? { variables: [], settings: [] };
  const variables = [...new Set([...refs.variables, ...kept.variables])];
  const doc = new Document({
    id,
    description,
    default: false,
    prefix: base.prefix,
    ...(variables.length > 0 ? { variables } : {}),
    ...(kept.settings.length > 0 ? { allow_toolshift_settings: kept.settings } : {}),
    backend: { mcp: refs.block },
  });
  doc.commentBefore = headerComment(opts.file, name, base.prefix, refs.variables, kept.settings);
  mkdirSync(opts.toolsetsDir, { recursive: true });
  writeFileSync(file, doc.toString({ lineWidth: 110 }));
  return {
    ...base,
    status: 'written',
    described: typeof described === 'string',
    variables: refs.variables,
    declared: [...variables, ...kept.settings],
    settings: kept.settings,
    ...(typeof described === 'string'
      ? {}
      : {
          note: `could not describe it (${refs.redact(described.error)}); improve the description in ${file}`,
        }),
  };
}

/** The comment atop a written file: where it came from, how its tools are named, what it needs set. */
function headerComment(
  from: string,
  name: string,
  prefix: string,
  variables: readonly string[],
  settings: readonly string[],
): string {
  return [
    ` Imported from ${path.basename(from)} (server "${name}") by toolshift toolsets import.`,
    ` Its tools are offered as ${prefix}<tool>, apart from toolshift's own and other servers' tools.`,
    ...(variables.length > 0
      ? [` Set ${variables.join(', ')} in the gateway's environment or .env; values are never stored here.`]
      : []),
    ...(settings.length > 0
      ? [
          ` allow_toolshift_settings sends toolshift's own ${settings.join(', ')} to this server`,
          ' (allowed with --allow-var); remove it unless the server must have that value.',
        ]
      : []),
  ].join('\n');
}
