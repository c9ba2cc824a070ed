import { discoveryCatalog, loadNeeds, measureRecall } from './tests/helpers/discovery.ts';

const catalog = await discoveryCatalog();
const all = loadNeeds() as { need: string; toolset: string; split?: string }[];
for (const split of ['tune', 'held_out']) {
  const needs = all.filter((n) => n.split === split);
  const r = measureRecall(catalog.gateway, needs);
  console.log(split, needs.length, 'r@1', r.recallAt1.toFixed(3), 'r@3', r.recallAt3.toFixed(3));
  if (process.env.SHOW === split) {
    for (const n of needs) {
      const got = catalog.gateway
        .listToolsets('d', n.need)
        .toolsets.slice(0, 3)
        .map((t) => t.id);
      if (got[0] !== n.toolset) console.log(`  want ${n.toolset} got ${got.join(',')} :: ${n.need}`);
    }
  }
}
await catalog.close();
process.exit(0);
