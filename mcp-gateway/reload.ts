import type { ToolsetSpec } from './toolset-files.ts';

// What a reload changes: toolsets added, removed, changed (their file says something else now) and
// unchanged, by id. The catalog applies it; this only compares.

/** The answer of a reload: ids by what happened to them, and problems that did not stop it. */
export interface ReloadResult {
  added: string[];
  removed: string[];
  changed: string[];
  unchanged: string[];
  /** Servers that could not be reached (their toolsets are loaded and show health "down"). */
  warnings: string[];
}

/** Everything in a spec that matters for what it offers (the server key, not its display form). */
function signature(spec: ToolsetSpec): string {
  const backend = typeof spec.backend === 'string' ? spec.backend : spec.backend.key;
  const { id, description, include, prefix, pin, timeoutMs, file } = spec;
  return JSON.stringify({
    id,
    description,
    default: spec.default,
    backend,
    include,
    prefix,
    pin,
    timeoutMs,
    file,
  });
}

/** Compares the running toolsets with the files just read. */
export function diffSpecs(
  current: readonly ToolsetSpec[],
  next: readonly ToolsetSpec[],
): Omit<ReloadResult, 'warnings'> {
  const before = new Map(current.map((s) => [s.id, signature(s)]));
  const after = new Map(next.map((s) => [s.id, signature(s)]));
  return {
    added: next.filter((s) => !before.has(s.id)).map((s) => s.id),
    removed: current.filter((s) => !after.has(s.id)).map((s) => s.id),
    changed: next.filter((s) => before.has(s.id) && before.get(s.id) !== after.get(s.id)).map((s) => s.id),
    unchanged: next.filter((s) => before.get(s.id) === after.get(s.id)).map((s) => s.id),
  };
}
