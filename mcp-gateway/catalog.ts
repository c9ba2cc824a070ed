import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { describeIssues } from '../lib/http.ts';
import type { ToolDefinition } from '../tool-server/contract.ts';
import type { Backend } from './backends/backend.ts';

// The toolset catalog: toolset files from TOOLSETS_DIR, checked against what the backends really serve.

const Name = z.string().regex(/^[a-z0-9_]{1,64}$/, 'must match ^[a-z0-9_]{1,64}$');

const ToolsetFile = z.object({
  id: Name,
  description: z.string().trim().min(1, 'must not be empty'),
  default: z.boolean().default(false),
  backend: z.string().default('tool-server'),
  tools: z.array(Name).min(1, 'list at least one tool'),
});

/** The agent's meta-tool; no backend tool may take its name. */
const RESERVED_TOOL = 'manage_toolsets';

/** A toolset as declared in its file. */
export type Toolset = z.infer<typeof ToolsetFile> & { file: string };

/** A tool the catalog can route: its definition, the toolset that offers it, and a compiled argument validator. */
export interface CatalogTool {
  definition: ToolDefinition;
  toolset: string;
  backend: Backend;
  validate: ValidateFunction;
}

/** The loaded catalog: toolsets in file order and every tool by name. */
export interface Catalog {
  toolsets: Toolset[];
  toolset(id: string): Toolset | undefined;
  tools: Map<string, CatalogTool>;
}

/** A toolset file or backend that does not fit; the message names the file and the tool. */
export class CatalogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Reads and validates every `*.yaml`/`*.yml` in `dir`, sorted by file name. */
export function loadToolsetFiles(dir: string): Toolset[] {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((f) => /\.ya?ml$/.test(f))
      .sort();
  } catch (err) {
    throw new CatalogError(`Cannot read the toolsets directory ${dir}: ${(err as Error).message}`);
  }
  const toolsets: Toolset[] = [];
  const seenIds = new Map<string, string>();
  const seenTools = new Map<string, string>();
  for (const name of names) {
    const file = path.join(dir, name);
    let raw: unknown;
    try {
      raw = parseYaml(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new CatalogError(`${file}: not valid YAML: ${(err as Error).message}`);
    }
    const parsed = ToolsetFile.safeParse(raw);
    if (!parsed.success) {
      throw new CatalogError(`${file}: ${describeIssues(parsed.error)}`);
    }
    const ts = parsed.data;
    const clash = seenIds.get(ts.id);
    if (clash) throw new CatalogError(`${file}: toolset id ${ts.id} is already used by ${clash}`);
    seenIds.set(ts.id, file);
    for (const tool of ts.tools) {
      if (tool === RESERVED_TOOL) {
        throw new CatalogError(
          `${file}: ${RESERVED_TOOL} is the agent's own meta-tool; a toolset cannot list it`,
        );
      }
      const other = seenTools.get(tool);
      if (other) throw new CatalogError(`${file}: tool ${tool} is already listed by toolset ${other}`);
      seenTools.set(tool, ts.id);
    }
    toolsets.push({ ...ts, file });
  }
  if (toolsets.length === 0) throw new CatalogError(`No toolset files (*.yaml) in ${dir}`);
  return toolsets;
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

/** Joins toolset files with the backends' tool lists; refuses a tool or backend that does not exist. */
export async function buildCatalog(
  toolsets: Toolset[],
  backends: Record<string, Backend>,
  opts: { waitMs?: number } = {},
): Promise<Catalog> {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const served = new Map<string, Map<string, ToolDefinition>>();
  const tools = new Map<string, CatalogTool>();
  for (const ts of toolsets) {
    const backend = backends[ts.backend];
    if (!backend) {
      throw new CatalogError(
        `${ts.file}: backend ${ts.backend} is not configured; valid backends: ${Object.keys(backends).join(', ')}`,
      );
    }
    if (!served.has(ts.backend)) {
      const defs = await listWithWait(backend, opts.waitMs ?? 0);
      served.set(ts.backend, new Map(defs.map((d) => [d.name, d])));
    }
    const available = served.get(ts.backend) as Map<string, ToolDefinition>;
    for (const name of ts.tools) {
      const definition = available.get(name);
      if (!definition) {
        throw new CatalogError(
          `${ts.file}: tool ${name} is not served by backend ${ts.backend}; it serves: ${[...available.keys()].join(', ')}`,
        );
      }
      const { $schema: _drop, ...schema } = definition.parameters;
      tools.set(name, { definition, toolset: ts.id, backend, validate: ajv.compile(schema) });
    }
  }
  const byId = new Map(toolsets.map((t) => [t.id, t]));
  return { toolsets, toolset: (id) => byId.get(id), tools };
}
