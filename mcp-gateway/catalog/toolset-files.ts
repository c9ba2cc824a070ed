import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { userDataDir } from '../../lib/config/installation.ts';
import { readYamlFile, YamlFileError } from '../../lib/config/yaml-file.ts';
import { isToolshiftSetting } from './env-expand.ts';
import { type McpBackendSpec, mcpBackend, resolveCommand } from './mcp-backend-spec.ts';
import { ToolsetFile } from './toolset-schema.ts';

// Toolset files: one YAML file per toolset, read and checked with file-and-line errors. The shipped ones are
// in TOOLSETS_DIR (an error there refuses the whole directory); the user's own (USER_TOOLSETS_DIR, default
// `<data dir>/toolsets`, where `toolsets import` writes) load after them, a user file replaces a shipped
// toolset with the same id, and a user file with an error is skipped with a warning while the rest load.
// A file names a native backend (`backend: tool-server`) or an upstream MCP server (`backend: {mcp: …}`),
// whose `${VAR}` references are filled here, from the environment, and never shown again. A file expands
// only the variables it declares (`variables:`), and toolshift's own settings only where the operator names
// them (`allow_toolshift_settings:`); any way a file is bad, its YAML included, is that file's error.

/** The meta-tool's name; no toolset may offer a tool by that name. */
export const RESERVED_TOOL = 'manage_toolsets';

/** A toolset as declared in its file. */
export interface ToolsetSpec {
  id: string;
  description: string;
  /** Words and phrases people use for what the toolset does: for discovery only, never shown to the model. */
  keywords: string[];
  default: boolean;
  file: string;
  /** A native backend's name, or an upstream MCP server. */
  backend: string | McpBackendSpec;
  /** Native: the tools. MCP: an optional include list of the server's own tool names. */
  include?: string[];
  prefix: string;
  pin: boolean;
  timeoutMs: number;
}

export type { McpBackendSpec };
export { resolveCommand };

/** A toolset file that does not fit; the message names the file (and line) and what to change. */
export class CatalogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The prefix `toolsets import` writes, and collision messages suggest: the toolset id and `_`, so a server's
 * `read_file` is offered as `<id>_read_file` and never meets another toolset's name.
 */
export function defaultPrefix(id: string): string {
  return `${id.slice(0, 31).replace(/_+$/, '')}_`;
}

/** The name an upstream tool gets in the gateway: the prefix, then the name with characters a model API refuses replaced by `_`. */
export function exposedName(prefix: string, upstreamName: string): string {
  return prefix + upstreamName.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** The variables `${…}` may use: the environment, plus the gateway's resolved data and toolsets dirs. */
export function toolsetVariables(
  dirs: { dataDir: string; toolsetsDir: string },
  env: Record<string, string | undefined> = process.env,
): Record<string, string | undefined> {
  return { ...env, TOOLSHIFT_DATA_DIR: dirs.dataDir, TOOLSETS_DIR: dirs.toolsetsDir };
}

/** The operator's policy may live beside the toolsets (the default POLICY_FILE); it is not a toolset. */
const POLICY_FILE_NAME = /^policy\.ya?ml$/;

/** Reads and validates every `*.yaml`/`*.yml` in `dir` but policy.yaml, sorted by file name. */
export function loadToolsetFiles(
  dir: string,
  vars: Record<string, string | undefined> = toolsetVariables({
    dataDir: path.resolve(process.env.TOOLSHIFT_DATA_DIR ?? userDataDir(process.env)),
    toolsetsDir: dir,
  }),
): ToolsetSpec[] {
  let names: string[];
  try {
    names = toolsetFileNames(dir);
  } catch (err) {
    throw new CatalogError(`Cannot read the toolsets directory ${dir}: ${(err as Error).message}`);
  }
  const specs = names.map((name) => readToolsetFile(path.join(dir, name), vars));
  if (specs.length === 0) throw new CatalogError(`No toolset files (*.yaml) in ${dir}`);
  checkNames(specs);
  return specs;
}

/** Where toolset files are read from: the shipped directory, and the user's (may not exist yet). */
export interface ToolsetSources {
  dir: string;
  userDir?: string;
}

/** The toolsets to run, and what was skipped or replaced on the way (for the log and a reload's answer). */
export interface LoadedToolsets {
  specs: ToolsetSpec[];
  warnings: string[];
  /** User files that replace a shipped toolset with the same id. */
  overrides: { id: string; file: string; shipped: string }[];
}

/**
 * The shipped toolsets (any error refuses them all, as loadToolsetFiles), then the user's: a user file that
 * does not load is skipped with a warning, and one with a shipped id replaces that toolset in its place.
 */
export function loadToolsets(
  sources: ToolsetSources,
  vars: Record<string, string | undefined> = toolsetVariables({
    dataDir: path.resolve(process.env.TOOLSHIFT_DATA_DIR ?? userDataDir(process.env)),
    toolsetsDir: sources.dir,
  }),
): LoadedToolsets {
  const shipped = loadToolsetFiles(sources.dir, vars);
  const warnings: string[] = [];
  const overrides: LoadedToolsets['overrides'] = [];
  const userDir = sources.userDir;
  if (!userDir || path.resolve(userDir) === path.resolve(sources.dir) || !existsSync(userDir)) {
    return { specs: shipped, warnings, overrides };
  }
  let names: string[];
  try {
    names = toolsetFileNames(userDir);
  } catch (err) {
    warnings.push(`Cannot read the user toolsets directory ${userDir}: ${(err as Error).message}`);
    return { specs: shipped, warnings, overrides };
  }
  const specs = [...shipped];
  const userIds = new Map<string, string>();
  for (const name of names) {
    const file = path.join(userDir, name);
    let spec: ToolsetSpec;
    try {
      spec = readToolsetFile(file, vars);
      checkNames([spec]);
    } catch (err) {
      // Whatever goes wrong with one user file is that file's: it is named and skipped, never the start's.
      const message = err instanceof CatalogError ? err.message : `${file}: ${(err as Error).message}`;
      warnings.push(`${message} (this file is skipped; the other toolsets load)`);
      continue;
    }
    const twin = userIds.get(spec.id);
    if (twin) {
      warnings.push(
        `${file}: toolset id ${spec.id} is already used by ${twin}; this file is skipped (give it another id)`,
      );
      continue;
    }
    userIds.set(spec.id, file);
    const at = specs.findIndex((s) => s.id === spec.id);
    if (at === -1) specs.push(spec);
    else {
      overrides.push({ id: spec.id, file, shipped: specs[at].file });
      specs[at] = spec;
    }
  }
  return { specs, warnings, overrides };
}

/** The toolset files of a directory, sorted: every `*.yaml`/`*.yml` but policy.yaml. */
function toolsetFileNames(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f) && !POLICY_FILE_NAME.test(f))
    .sort();
}

function readToolsetFile(file: string, vars: Record<string, string | undefined>): ToolsetSpec {
  let yaml: ReturnType<typeof readYamlFile>;
  try {
    yaml = readYamlFile(file, (text) =>
      /\{[^}\n]*\$\{/.test(text) ? ` (inside { } put a value with \${VAR} in quotes)` : '',
    );
  } catch (err) {
    if (err instanceof YamlFileError) throw new CatalogError(err.message);
    throw err;
  }
  const { doc, lines } = yaml;
  const at = (where: readonly PropertyKey[]) => {
    for (let n = where.length; n >= 0; n--) {
      const node = doc.getIn(where.slice(0, n), true) as { range?: [number, number] } | undefined;
      if (node?.range) return `${file}:${lines.linePos(node.range[0]).line}`;
    }
    return file;
  };
  const parsed = ToolsetFile.safeParse(yaml.value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    throw new CatalogError(`${at(issue.path)}: ${where}${issue.message}`);
  }
  const f = parsed.data;
  const fail = (where: readonly PropertyKey[], message: string): never => {
    throw new CatalogError(`${at(where)}: ${message}`);
  };
  let backend: ToolsetSpec['backend'];
  if (typeof f.backend === 'string') {
    if (!f.tools) fail(['backend'], `a ${f.backend} toolset must list its tools`);
    for (const [i, tool] of (f.tools ?? []).entries()) {
      if (!/^[a-z0-9_]{1,64}$/.test(tool)) fail(['tools', i], `tools.${i}: must match ^[a-z0-9_]{1,64}$`);
    }
    if (f.prefix) fail(['prefix'], 'prefix is for MCP backends; native tools keep their names');
    backend = f.backend;
  } else {
    backend = mcpBackend(file, f.backend.mcp, vars, declaredVariables(f, fail), userSecrets(f, fail), fail);
    if (backend.oauth) backend.oauth.toolScopes = f.tool_scopes;
  }
  if (Object.keys(f.tool_scopes).length > 0 && (typeof backend === 'string' || !backend.oauth)) {
    fail(['tool_scopes'], 'tool_scopes are for an oauth server (backend.mcp.oauth)');
  }
  return {
    id: f.id,
    description: f.description,
    keywords: f.keywords,
    default: f.default,
    file,
    backend,
    include: f.tools,
    prefix: f.prefix ?? '',
    pin: f.pin,
    timeoutMs: Math.round(f.timeout_seconds * 1000),
  };
}

export type Fail = (where: readonly PropertyKey[], message: string) => never;

/** The variables each person may set for themselves (`user_secrets`): declared ones, of an MCP backend. */
function userSecrets(f: z.infer<typeof ToolsetFile>, fail: Fail): Set<string> {
  for (const [i, name] of f.user_secrets.entries()) {
    if (!f.variables.includes(name)) {
      fail(
        ['user_secrets', i],
        `${name} is not declared: list it under variables too (variables: [${name}])`,
      );
    }
  }
  return new Set(f.user_secrets);
}

/**
 * The variables a file may expand: those it lists under `variables`, where toolshift's own settings are
 * refused unless `allow_toolshift_settings` names them too (or alone).
 */
function declaredVariables(f: z.infer<typeof ToolsetFile>, fail: Fail): Set<string> {
  const allowed = new Set(f.allow_toolshift_settings);
  for (const [i, name] of f.allow_toolshift_settings.entries()) {
    if (!isToolshiftSetting(name)) {
      fail(
        ['allow_toolshift_settings', i],
        `${name} is not one of toolshift's settings; list it under variables instead`,
      );
    }
  }
  for (const [i, name] of f.variables.entries()) {
    if (isToolshiftSetting(name) && !allowed.has(name)) {
      fail(
        ['variables', i],
        `${name} is one of toolshift's own settings, which a toolset does not get: use a variable of ` +
          `this server's own (e.g. ${f.id.toUpperCase()}_${name}), or, to send toolshift's value to this ` +
          `server, name it under allow_toolshift_settings`,
      );
    }
  }
  return new Set([...f.variables, ...allowed]);
}

/**
 * Ids must be unique and no declared tool name (with its prefix) may be the meta-tool's. Two toolsets offering
 * the same name is not an error of the directory: the catalog skips the later one (catalog-build.ts
 * resolveCollisions) and the rest load.
 */
function checkNames(specs: ToolsetSpec[]) {
  const ids = new Map<string, string>();
  for (const spec of specs) {
    const other = ids.get(spec.id);
    if (other) throw new CatalogError(`${spec.file}: toolset id ${spec.id} is already used by ${other}`);
    ids.set(spec.id, spec.file);
    const mcp = typeof spec.backend !== 'string';
    for (const declared of spec.include ?? []) {
      const name = mcp ? exposedName(spec.prefix, declared) : declared;
      if (name === RESERVED_TOOL) {
        throw new CatalogError(
          `${spec.file}: ${RESERVED_TOOL} is the agent's own meta-tool; a toolset cannot offer it${mcp ? ' (set a prefix)' : ''}`,
        );
      }
    }
  }
}
