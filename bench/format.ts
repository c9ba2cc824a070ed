// How the benchmark's figures are written in BENCHMARKS.md.

export const pct = (x: number | null) => (x === null ? '–' : `${(x * 100).toFixed(1)}%`);
export const n0 = (x: number) => Math.round(x).toLocaleString('en-US');
export const f2 = (x: number) => x.toFixed(2);
export const f3 = (x: number) => x.toFixed(3);
export const ms = (x: number) => `${x.toFixed(2)} ms`;
export const mib = (x: number) => `${(x / 2 ** 20).toFixed(1)} MiB`;
export const usd = (x: number) => `$${x.toFixed(4)}`;

/** A Markdown table. */
export function table(head: string[], rows: (string | number)[][]): string {
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}
