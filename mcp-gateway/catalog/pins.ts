import { createHash } from 'node:crypto';
import type { Tool } from '@modelcontextprotocol/client';
import { createTwoFilesPatch } from 'diff';

// Rug-pull protection: an upstream server could change a tool's description or schema after it was
// trusted (e.g. to slip instructions to the model). The gateway pins a hash of every definition the
// first time it sees the toolset, and withholds a definition that later differs, or a tool that appears
// later, until an operator approves it.

/** The parts of a definition that are pinned: what the model reads and what the arguments may be. */
export interface PinnedDefinition {
  name: string;
  title?: string;
  description?: string;
  inputSchema: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
}

/** A definition as the pin store keeps it. */
export interface Pin {
  hash: string;
  definition: PinnedDefinition;
}

/** Why a listed tool is not offered. */
export type Withheld =
  | { name: string; status: 'changed'; diff: string; definition: PinnedDefinition }
  | { name: string; status: 'new'; definition: PinnedDefinition };

/** The pinned fields of an upstream tool. */
export function pinnedShape(tool: Tool): PinnedDefinition {
  return {
    name: tool.name,
    ...(tool.title !== undefined ? { title: tool.title } : {}),
    ...(tool.description !== undefined ? { description: tool.description } : {}),
    inputSchema: tool.inputSchema,
    ...(tool.outputSchema !== undefined ? { outputSchema: tool.outputSchema } : {}),
    ...(tool.annotations !== undefined ? { annotations: tool.annotations } : {}),
  };
}

/** JSON with object keys sorted at every level and 2-space indents, so equal definitions print equal. */
export function canonicalJson(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v && typeof v === 'object') {
      return Object.fromEntries(
        Object.keys(v)
          .sort()
          .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return JSON.stringify(sort(value), null, 2);
}

/** sha256 of the canonical definition. */
export function definitionHash(definition: PinnedDefinition): string {
  return createHash('sha256').update(canonicalJson(definition)).digest('hex');
}

/** A name as one line of a diff's header: escaped as in JSON, so a name with line breaks cannot add diff lines. */
const headerName = (name: string) => JSON.stringify(name).slice(1, -1);

/** A unified diff between the approved and the offered definition. */
export function definitionDiff(before: PinnedDefinition, after: PinnedDefinition): string {
  return createTwoFilesPatch(
    `${headerName(before.name)} (approved)`,
    `${headerName(after.name)} (offered now)`,
    `${canonicalJson(before)}\n`,
    `${canonicalJson(after)}\n`,
    undefined,
    undefined,
    { context: 2 },
  );
}

/**
 * Splits a listing into what may be offered and what is withheld. `pins` is null when the toolset has
 * never been pinned: then everything is trusted (the caller pins it), as it is when pinning is off.
 */
export function judgeListing(
  listing: readonly PinnedDefinition[],
  pins: ReadonlyMap<string, Pin> | null,
): { offered: PinnedDefinition[]; withheld: Withheld[] } {
  if (!pins) return { offered: [...listing], withheld: [] };
  const offered: PinnedDefinition[] = [];
  const withheld: Withheld[] = [];
  for (const definition of listing) {
    const pin = pins.get(definition.name);
    if (!pin) withheld.push({ name: definition.name, status: 'new', definition });
    else if (pin.hash === definitionHash(definition)) offered.push(definition);
    else
      withheld.push({
        name: definition.name,
        status: 'changed',
        diff: definitionDiff(pin.definition, definition),
        definition,
      });
  }
  return { offered, withheld };
}

/** Where listings and pins persist (the gateway store, on either database). */
export interface PinStore {
  lastListing(toolsetId: string): Promise<PinnedDefinition[]>;
  saveListing(toolsetId: string, definitions: readonly PinnedDefinition[]): Promise<void>;
  pins(toolsetId: string): Promise<Map<string, Pin> | null>;
  pin(toolsetId: string, pins: readonly Pin[]): Promise<void>;
  dropToolset(toolsetId: string): Promise<void>;
}

/** A PinStore that forgets on restart, for catalogs built without a database (tests, one-off tools). */
export function memoryPinStore(): PinStore {
  const listings = new Map<string, PinnedDefinition[]>();
  const pins = new Map<string, Map<string, Pin>>();
  return {
    lastListing: async (id) => listings.get(id) ?? [],
    saveListing: async (id, definitions) => {
      listings.set(id, [...definitions]);
    },
    pins: async (id) => (pins.has(id) ? new Map(pins.get(id)) : null),
    async pin(id, added) {
      const current = pins.get(id) ?? new Map<string, Pin>();
      for (const p of added) current.set(p.definition.name, p);
      pins.set(id, current);
    },
    dropToolset: async () => {},
  };
}
