import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { ToolDefinition } from '../../tool-server/contract.ts';
import type { Backend } from '../backends/backend.ts';
import type { GatewayTool } from '../contract.ts';
import { judgeListing, type Pin, type PinnedDefinition, type Withheld } from './pins.ts';
import {
  CatalogError,
  defaultPrefix,
  exposedName,
  RESERVED_TOOL,
  type ToolsetSpec,
} from './toolset-files.ts';

// The pure half of the catalog: from toolset files, backend listings and pins to the tools each toolset
// offers, what it withholds, and name collisions between toolsets. No I/O here; catalog.ts drives it.

/** A tool definition as the gateway offers it. */
export type GatewayToolDefinition = Omit<GatewayTool, 'toolset'>;

/** A tool the catalog can route: its definition, the toolset that offers it, and a compiled argument validator. */
export interface CatalogTool {
  definition: GatewayToolDefinition;
  toolset: string;
  backend: Backend;
  validate: ValidateFunction;
}

/** A withheld upstream tool, under the name the gateway would offer it by. */
export type WithheldTool = Withheld & { exposed: string };

/** One toolset's current state. */
export interface ToolsetRuntime {
  spec: ToolsetSpec;
  offered: CatalogTool[];
  withheld: WithheldTool[];
  /** Why the toolset offers nothing (an include-list tool the server lacks, a name collision …). */
  error?: string;
  /** MCP: whether a tool listing is known (from a connection, or stored from an earlier run). */
  listed: boolean;
  /** MCP: gateway name → the server's own name. */
  upstreamNames: Map<string, string>;
}

/** Compiles JSON Schemas once per distinct schema; a schema ajv cannot compile is left to the backend to check. */
export function schemaCompiler(onError: (message: string) => void) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false });
  const cache = new Map<string, ValidateFunction>();
  return (schema: Record<string, unknown>): ValidateFunction => {
    const { $schema: _drop, ...rest } = schema;
    const key = JSON.stringify(rest);
    let fn = cache.get(key);
    if (!fn) {
      try {
        fn = ajv.compile(rest);
      } catch (err) {
        onError((err as Error).message);
        fn = ajv.compile({ type: 'object' });
      }
      cache.set(key, fn);
    }
    return fn;
  };
}

type Compile = ReturnType<typeof schemaCompiler>;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A backend's definition as the gateway offers it: its output schema, when it has one, as `output_schema`. */
function gatewayDefinition(
  d: Omit<GatewayToolDefinition, 'output_schema'> & { outputSchema?: Record<string, unknown> },
): GatewayToolDefinition {
  const { outputSchema, ...rest } = d;
  return outputSchema ? { ...rest, output_schema: outputSchema } : rest;
}

/** A native toolset: every listed tool must be served by its backend. */
export function nativeRuntime(
  spec: ToolsetSpec,
  served: ReadonlyMap<string, ToolDefinition>,
  backend: Backend,
  compile: Compile,
): ToolsetRuntime {
  const offered = (spec.include ?? []).map((name) => {
    const definition = served.get(name);
    if (!definition) {
      throw new CatalogError(
        `${spec.file}: tool ${name} is not served by backend ${spec.backend as string}; it serves: ${[...served.keys()].join(', ')}`,
      );
    }
    return {
      definition: gatewayDefinition(definition),
      toolset: spec.id,
      backend,
      validate: compile(definition.parameters),
    };
  });
  return { spec, offered, withheld: [], listed: true, upstreamNames: new Map() };
}

/**
 * An MCP toolset from the server's listing: pinned definitions are offered, changed or new ones withheld,
 * the include list applied, and names prefixed. `pins` null means trust the listing (first sight, or `pin: false`).
 */
export function mcpRuntime(
  spec: ToolsetSpec,
  listing: readonly PinnedDefinition[] | null,
  pins: ReadonlyMap<string, Pin> | null,
  makeBackend: (upstreamNames: ReadonlyMap<string, string>) => Backend,
  compile: Compile,
): ToolsetRuntime {
  const upstreamNames = new Map<string, string>();
  if (!listing) return { spec, offered: [], withheld: [], listed: false, upstreamNames };
  const label = typeof spec.backend === 'string' ? spec.backend : spec.backend.label;
  const include = spec.include ? new Set(spec.include) : null;
  const served = new Set(listing.map((d) => d.name));
  const missing = spec.include?.filter((name) => !served.has(name)) ?? [];
  if (missing.length > 0) {
    const error = `${spec.file}: tool ${missing.join(', ')} is not served by ${label}; it serves: ${[...served].join(', ')}`;
    return { spec, offered: [], withheld: [], listed: true, upstreamNames, error };
  }
  const judged = judgeListing(listing, spec.pin ? pins : null);
  const kept = (d: { name: string }) => !include || include.has(d.name);
  const backend = makeBackend(upstreamNames);
  const offered: CatalogTool[] = [];
  for (const d of judged.offered.filter(kept)) {
    const name = exposedName(spec.prefix, d.name);
    if (name.length > 64 || upstreamNames.has(name)) {
      const why =
        name.length > 64 ? 'is longer than 64 characters' : `is also the name of ${upstreamNames.get(name)}`;
      const error = `${spec.file}: the server's tool ${d.name} would be offered as ${name}, which ${why}; use an include list or a shorter prefix`;
      return { spec, offered: [], withheld: [], listed: true, upstreamNames: new Map(), error };
    }
    upstreamNames.set(name, d.name);
    const definition = gatewayDefinition({
      name,
      description: d.description ?? d.title ?? '',
      parameters: (d.inputSchema ?? { type: 'object' }) as Record<string, unknown>,
      outputSchema: isObject(d.outputSchema) ? d.outputSchema : undefined,
      annotations: (d.annotations ?? {}) as GatewayToolDefinition['annotations'],
    });
    offered.push({ definition, toolset: spec.id, backend, validate: compile(definition.parameters) });
  }
  const withheld = judged.withheld
    .filter(kept)
    .map((w) => ({ ...w, exposed: exposedName(spec.prefix, w.name) }));
  return { spec, offered, withheld, listed: true, upstreamNames };
}

/** Lists a backend's tools, waiting up to `waitMs` for it to come up (services may start in any order). */
async function listWithWait(backend: Backend, waitMs: number): Promise<ToolDefinition[]> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await backend.listTools();
    } catch (err) {
      if (Date.now() >= deadline) {
        throw new CatalogError(`Backend ${backend.name} is not reachable: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** The native toolsets of `next`, each checked against what its backend serves (listed once per backend). */
export async function nativeRuntimes(
  next: readonly ToolsetSpec[],
  backends: Record<string, Backend>,
  waitMs: number,
  compile: Compile,
): Promise<Map<string, ToolsetRuntime>> {
  const served = new Map<string, Map<string, ToolDefinition>>();
  const out = new Map<string, ToolsetRuntime>();
  for (const spec of next) {
    if (typeof spec.backend !== 'string') continue;
    const backend = backends[spec.backend as string];
    if (!backend) {
      throw new CatalogError(
        `${spec.file}: backend ${spec.backend} is not configured; valid backends: ${Object.keys(backends).join(', ')}, or {mcp: …}`,
      );
    }
    if (!served.has(backend.name)) {
      const defs = await listWithWait(backend, waitMs);
      served.set(backend.name, new Map(defs.map((d) => [d.name, d])));
    }
    out.set(
      spec.id,
      nativeRuntime(spec, served.get(backend.name) as Map<string, ToolDefinition>, backend, compile),
    );
  }
  return out;
}

/**
 * Gives each tool name to one toolset: toolsets that already offered tools keep them (`incumbents`), then
 * the rest in file order (the shipped files before the user's). A toolset offering a name already taken (or
 * the meta-tool's) is skipped: marked in error with a message naming every colliding tool, the toolsets that
 * hold them and the fix, and it offers nothing; the others load. The result keeps the input order.
 */
export function resolveCollisions(
  runtimes: readonly ToolsetRuntime[],
  incumbents: ReadonlySet<string> = new Set(),
): ToolsetRuntime[] {
  const taken = new Map<string, ToolsetSpec>();
  const resolved = new Map<string, ToolsetRuntime>();
  const order = [
    ...runtimes.filter((rt) => incumbents.has(rt.spec.id)),
    ...runtimes.filter((rt) => !incumbents.has(rt.spec.id)),
  ];
  for (const rt of order) resolved.set(rt.spec.id, claim(rt, taken));
  return runtimes.map((rt) => resolved.get(rt.spec.id) as ToolsetRuntime);
}

function claim(rt: ToolsetRuntime, taken: Map<string, ToolsetSpec>): ToolsetRuntime {
  if (rt.error) return rt;
  const { spec } = rt;
  const mcp = typeof spec.backend !== 'string';
  const label = typeof spec.backend === 'string' ? spec.backend : spec.backend.label;
  if (rt.offered.some((tool) => tool.definition.name === RESERVED_TOOL)) {
    return failed(
      rt,
      `${spec.file}: ${label} offers ${RESERVED_TOOL}, the agent's own meta-tool; set a prefix`,
    );
  }
  const clashes = new Map<ToolsetSpec, string[]>();
  for (const tool of rt.offered) {
    const owner = taken.get(tool.definition.name);
    if (owner) clashes.set(owner, [...(clashes.get(owner) ?? []), tool.definition.name]);
  }
  if (clashes.size > 0) {
    const names = [...clashes.values()].flat();
    const one = names.length === 1;
    const where = [...clashes]
      .map(([owner, clash]) => `${clash.join(', ')} (toolset ${owner.id}, ${owner.file})`)
      .join('; ');
    const fix = !mcp
      ? `remove ${one ? 'it' : 'them'} from the tools of ${spec.file} or of the other toolset`
      : spec.prefix
        ? `change prefix: ${spec.prefix} in ${spec.file} to one no other tool starts with`
        : `add prefix: ${defaultPrefix(spec.id)} to ${spec.file} (its tools are then offered as ${defaultPrefix(spec.id)}<tool>)`;
    return failed(
      rt,
      `${spec.file}: ${label} offers ${one ? 'a tool name' : 'tool names'} another toolset already offers: ${where}; ${fix}`,
    );
  }
  for (const tool of rt.offered) taken.set(tool.definition.name, spec);
  return rt;
}

function failed(rt: ToolsetRuntime, error: string): ToolsetRuntime {
  return { ...rt, offered: [], withheld: [], upstreamNames: new Map(), error };
}
