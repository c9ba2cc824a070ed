import { discoveryCatalog, loadNeeds, measureRecall } from '../tests/helpers/discovery.ts';

// `npm run bench`, discovery: recall@1 and recall@3 of the right toolset for the plain-language needs of
// tests/fixtures/discovery/needs.json, through the gateway's ranked LIST, on the repository's toolsets plus
// the GitHub MCP server's 117 recorded tools split into toolsets; then the same with a second (Enterprise)
// copy of the GitHub toolsets, for a catalog of over 200 tools. Figures only, never pass/fail.

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** Prints the discovery figures. */
export async function benchDiscovery(): Promise<void> {
  const needs = loadNeeds();
  console.log(`\ndiscovery: ${needs.length} plain-language needs, manage_toolsets LIST with a query`);
  for (const enterprise of [false, true]) {
    const catalog = await discoveryCatalog({ enterprise });
    try {
      const same = (got: string, want: string) => got === want || got === want.replace(/^github_/, 'ghe_');
      catalog.gateway.listToolsets('discovery', 'warm up the index');
      const started = performance.now();
      const recall = measureRecall(catalog.gateway, needs, same);
      const msPerQuery = (performance.now() - started) / needs.length;
      console.log(
        `  ${catalog.toolsets} toolsets, ${catalog.tools} tools${enterprise ? ' (GitHub twice: github.com and Enterprise; either copy counts)' : ''}: ` +
          `recall@1 ${pct(recall.recallAt1)}, recall@3 ${pct(recall.recallAt3)}, ${msPerQuery.toFixed(2)} ms per query`,
      );
      if (!enterprise) {
        for (const m of recall.misses)
          console.log(`    missed: "${m.need}" → ${m.want}; got ${m.got.join(', ')}`);
      }
    } finally {
      await catalog.close();
    }
  }
}
