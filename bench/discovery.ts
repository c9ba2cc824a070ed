import { discoveryCatalog, loadNeeds, type Need } from '../tests/helpers/discovery.ts';
import { postJson } from './arms.ts';

// Figure 5, discovery: recall@1 and recall@3 of the right toolset for the plain-language needs of
// tests/fixtures/discovery/needs.json, asked as a model asks — manage_toolsets LIST with a query, through the
// gateway's HTTP route — over the whole benchmark catalog. A second figure repeats it in process on a catalog
// of over 200 tools (the GitHub toolsets twice: github.com and an Enterprise copy).

/** Recall over some of the needs. */
export interface SplitRecall {
  needs: number;
  recallAt1: number;
  recallAt3: number;
}

/** Recall of one catalog: over all needs, and over each split (tuning, held out, fresh). */
export interface Recall {
  toolsets: number;
  tools: number;
  needs: number;
  recallAt1: number;
  recallAt3: number;
  msPerQuery: number;
  /** The needs the weights and keywords may be tuned on, and those measured only (absent in older reports). */
  tune?: SplitRecall;
  heldOut?: SplitRecall;
  /** Needs in everyday words, measured only: the estimate of needs written by people (absent in older reports). */
  fresh?: SplitRecall;
  /** Misses among the tuning needs (the others are counted, not listed: they are not to be tuned on). */
  misses: { need: string; want: string; got: string[] }[];
}

/** Tallies each need's top three into the figures of each split. */
function tally(results: { need: Need; got: string[] }[], same: (got: string, want: string) => boolean) {
  const of = (split?: string) => {
    const rows = split ? results.filter((r) => r.need.split === split) : results;
    const at1 = rows.filter((r) => r.got[0] !== undefined && same(r.got[0], r.need.toolset)).length;
    const at3 = rows.filter((r) => r.got.some((g) => same(g, r.need.toolset))).length;
    return { needs: rows.length, recallAt1: at1 / rows.length, recallAt3: at3 / rows.length };
  };
  const misses = results
    .filter((r) => r.need.split === 'tune' && !r.got.some((g) => same(g, r.need.toolset)))
    .map((r) => ({ need: r.need.need, want: r.need.toolset, got: r.got }));
  return { ...of(), tune: of('tune'), heldOut: of('held_out'), fresh: of('fresh'), misses };
}

/** LIST with each need's words over the running gateway; `toolsets`/`tools` describe its catalog. */
export async function recallOverHttp(gatewayUrl: string, catalogSize: { toolsets: number; tools: number }) {
  const needs: Need[] = loadNeeds();
  const results: { need: Need; got: string[] }[] = [];
  const started = performance.now();
  for (const need of needs) {
    const { result } = await postJson(`${gatewayUrl}/mcp/manage_toolsets`, {
      session_id: 'bench-discovery',
      arguments: { action: 'LIST', toolset_ids: [], query: need.need },
    });
    results.push({ need, got: (result.toolsets as { id: string }[]).slice(0, 3).map((t) => t.id) });
  }
  const msPerQuery = (performance.now() - started) / needs.length;
  return { ...catalogSize, ...tally(results, (got, want) => got === want), msPerQuery } satisfies Recall;
}

/** The same needs on a catalog of over 200 tools, in process (the gateway's ranked LIST). */
export async function recallAtScale(): Promise<Recall> {
  const needs = loadNeeds();
  const catalog = await discoveryCatalog({ enterprise: true });
  try {
    const same = (got: string, want: string) => got === want || got === want.replace(/^github_/, 'ghe_');
    await catalog.gateway.listToolsets('discovery', 'warm up the index');
    const started = performance.now();
    const results = [];
    for (const need of needs) {
      const { toolsets } = await catalog.gateway.listToolsets('discovery', need.need);
      results.push({ need, got: toolsets.slice(0, 3).map((t) => t.id) });
    }
    const msPerQuery = (performance.now() - started) / needs.length;
    return { toolsets: catalog.toolsets, tools: catalog.tools, ...tally(results, same), msPerQuery };
  } finally {
    await catalog.close();
  }
}
