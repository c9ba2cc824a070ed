import { nativeRuntimes } from './build.ts';
import {
  type CatalogState,
  connectionFor,
  install,
  inTurn,
  isMcp,
  mcpToolsetRuntime,
  prepare,
  repin,
} from './catalog-state.ts';
import { definitionHash } from './pins.ts';
import { type ReloadResult, reloadCatalog } from './reload.ts';
import { CatalogError, loadToolsets } from './toolset-files.ts';

// What an operator changes in the catalog: withheld tools approved, the toolset files reloaded.

/**
 * Approves the withheld tools an operator reviewed, each named with the hash the listing showed. One whose
 * definition changed since (another hash now) is not released and comes back in `changedSinceShown`.
 */
export async function approve(
  st: CatalogState,
  id: string,
  reviewed: readonly { name: string; hash: string }[],
): Promise<{ approved: string[]; changedSinceShown: { name: string; hash: string }[] }> {
  const rt = st.runtimes.get(id);
  if (!rt) throw new CatalogError(`Unknown toolset ${id}`);
  const find = (n: string) => rt.withheld.find((w) => w.exposed === n || w.name === n);
  const unknown = reviewed.filter((r) => !find(r.name)).map((r) => r.name);
  if (unknown.length > 0) {
    const held = rt.withheld.map((w) => w.exposed).join(', ') || 'none';
    throw new CatalogError(`Not withheld in toolset ${id}: ${unknown.join(', ')}; withheld: ${held}`);
  }
  const pending = [];
  const changedSinceShown = [];
  for (const r of reviewed) {
    const w = find(r.name) as (typeof rt.withheld)[number];
    const now = definitionHash(w.definition);
    if (now === r.hash) pending.push(w);
    else changedSinceShown.push({ name: w.exposed, hash: now });
  }
  if (pending.length > 0) {
    await st.store.pin(
      id,
      pending.map((w) => ({ hash: definitionHash(w.definition), definition: w.definition })),
    );
    await repin(st, id);
  }
  return { approved: pending.map((w) => w.exposed), changedSinceShown };
}

/**
 * Re-reads the toolset files and swaps the catalog, or throws (CatalogError) and changes nothing. Starts
 * only the servers of new or changed `default` toolsets, as the start does.
 */
export async function reload(st: CatalogState): Promise<ReloadResult> {
  const source = st.opts.source;
  if (!source) throw new CatalogError('This gateway was started without a toolsets directory to reload');
  if (st.reloading) throw new CatalogError('A reload is already running; try again when it ends');
  st.reloading = true;
  try {
    const result = await inTurn(st, () =>
      reloadCatalog({
        current: st.specs,
        load: () => loadToolsets(source, source.vars?.()),
        connections: st.connections,
        applied: st.applied,
        nativeRuntimes: (next) => nativeRuntimes(next, st.backends, 0, st.compile),
        connectionFor: (spec) => connectionFor(st, spec),
        mcpRuntime: (spec, listing, persist) => mcpToolsetRuntime(st, spec, listing, persist),
        dropToolset: (id) => st.store.dropToolset(id),
        install: (specs, runtimes, changed) => install(st, specs, runtimes, changed),
      }),
    );
    for (const id of [...result.added, ...result.changed]) {
      const spec = st.specs.find((s) => s.id === id);
      if (!spec?.default || !isMcp(spec)) continue;
      await prepare(st, [id]).catch((err: Error) =>
        result.warnings.push(`toolset ${id} is default but not ready: ${err.message}`),
      );
    }
    return result;
  } finally {
    st.reloading = false;
  }
}
