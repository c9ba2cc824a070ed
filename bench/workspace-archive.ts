import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CUSTOMERS, seeded } from './workspace-data.ts';

// archive/: three teams' reports, seven each, as teams write them: sales' weekly pipeline notes, support's
// monthly digests and engineering's incident reviews. Their length follows what happened that week or month,
// so their sizes differ the way real reports do; the first line of each is its title.

const r = seeded(14);
const euro = (n: number) => `€${n.toLocaleString('en-US')}`;
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July'];
const OWNERS = ['Lena Vogt', 'Marc Aubert', 'Sanne de Boer', 'Jonas Weiß'];
const DEALS = [
  'Toner contract, 12 months',
  'Paper and envelopes, quarterly delivery',
  'Office chairs for a new floor',
  'Headsets for the support team',
  'Shipping supplies, framework order',
  'Stationery for the spring intake',
  'Label printers and labels',
];
const STAGES = ['won', 'in negotiation', 'proposal sent', 'lost'];

function salesWeekly(week: number): string {
  const rows = Array.from({ length: r.int(2, 14) }, () => ({
    customer: r.pick(CUSTOMERS).name,
    deal: r.pick(DEALS),
    value: r.int(6, 180) * 100,
    stage: r.pick(STAGES),
  }));
  const won = rows.filter((x) => x.stage === 'won');
  const open = rows.filter((x) => x.stage !== 'won' && x.stage !== 'lost');
  const pipeline = open.reduce((s, x) => s + x.value, 0);
  return [
    `# Sales weekly 2026-W${String(week).padStart(2, '0')}: pipeline ${euro(pipeline)}, ${won.length} ${won.length === 1 ? 'deal' : 'deals'} won`,
    '',
    `Owner: ${r.pick(OWNERS)}. Every deal touched this week, with its stage on Friday evening.`,
    '',
    '| Customer | Deal | Value | Stage |',
    '|---|---|---|---|',
    ...rows.map((x) => `| ${x.customer} | ${x.deal} | ${euro(x.value)} | ${x.stage} |`),
    '',
    '## Next week',
    ...open.slice(0, 4).map((x) => `- Follow up with ${x.customer} on "${x.deal}".`),
    '',
  ].join('\n');
}

const THEMES = [
  'Invoice questions (copies, VAT numbers, due dates)',
  'Late or partial deliveries',
  'Wrong item shipped',
  'Damaged parcels',
  'Toner compatibility',
  'Account and log-in problems',
  'Returns and credit notes',
];
const NOTES = [
  'asked for all 2025 invoices as one PDF; sent the same day.',
  'received chairs without armrests; replacement parts shipped.',
  'was charged twice for one order; refunded and the payment provider informed.',
  'could not find the VAT number on an invoice; the template now shows it in the header.',
  'reported a parcel left outside in the rain; carrier complaint filed.',
  'wanted to change the delivery address of a standing order.',
];

function supportDigest(month: number): string {
  const counts = THEMES.map(() => r.int(2, 45));
  const total = counts.reduce((a, b) => a + b, 0);
  const notable = Array.from({ length: r.int(1, 9) }, () => ({
    who: r.pick(CUSTOMERS).name,
    what: r.pick(NOTES),
  }));
  return [
    `# Support digest, ${MONTHS[month]} 2026: ${total} tickets, median first reply ${r.int(1, 5)} h ${r.int(0, 59)} min`,
    '',
    '## Themes',
    ...THEMES.map((t, i) => `- ${t}: ${counts[i]}`),
    '',
    '## Notable tickets',
    ...notable.map((n) => `- ${n.who} ${n.what}`),
    '',
  ].join('\n');
}

const INCIDENTS = [
  ['checkout timeouts', 'the payment provider answered slowly', 'a shorter timeout and a retry with backoff'],
  [
    'invoices sent twice',
    'a retried job did not check whether it had already run',
    'an idempotency key per invoice run',
  ],
  [
    'stock counts off by one',
    'returns were booked before the parcel arrived',
    'book returns on arrival only',
  ],
  ['search returning no products', 'the nightly index rebuild failed silently', 'an alert on an empty index'],
  [
    'shop down for 40 minutes',
    'a certificate expired',
    'renewal two weeks ahead, with a check in monitoring',
  ],
  ['emails not delivered', 'the mail provider throttled our domain', 'a second provider as fallback'],
  ['prices shown without VAT', 'a configuration flag was flipped in a deploy', 'flags reviewed like code'],
];

function incidentReview(i: number): string {
  const [what, cause, fix] = INCIDENTS[i];
  const steps = Array.from({ length: r.int(3, 16) }, (_, k) => {
    const minute = String(k * r.int(2, 9)).padStart(2, '0');
    return `- 14:${minute} ${r.pick(['On-call paged', 'Rolled back the last deploy', 'Checked the dashboards', 'Posted a status update', 'Raised limits', 'Restarted the worker', 'Confirmed with a customer'])}.`;
  });
  return [
    `# Incident review: ${what} on ${r.int(2, 27)} ${MONTHS[i]} 2026`,
    '',
    `Impact: ${r.int(12, 400)} customers affected for ${r.int(10, 90)} minutes. Cause: ${cause}.`,
    '',
    '## Timeline',
    ...steps,
    '',
    `## What we change\n- ${fix}.`,
    '',
  ].join('\n');
}

/** The archive's files by path (relative to the workspace), each with its text. */
export const ARCHIVE: Map<string, string> = new Map([
  ...Array.from(
    { length: 7 },
    (_, i) => [`archive/sales/2026-W${String(i + 10).padStart(2, '0')}.md`, salesWeekly(i + 10)] as const,
  ),
  ...Array.from(
    { length: 7 },
    (_, i) => [`archive/support/2026-${String(i + 1).padStart(2, '0')}.md`, supportDigest(i)] as const,
  ),
  ...INCIDENTS.map(
    (x, i) => [`archive/engineering/incident-${x[0].replace(/ /g, '-')}.md`, incidentReview(i)] as const,
  ),
]);

/** The archive's five largest files, largest first, with their sizes and first lines. */
export function largestArchiveFiles(): { path: string; size: number; first: string }[] {
  return [...ARCHIVE]
    .map(([p, text]) => ({ path: p, size: Buffer.byteLength(text), first: text.split('\n')[0] }))
    .sort((a, b) => b.size - a.size)
    .slice(0, 5);
}

/** Writes archive/. */
export async function writeArchive(root: string): Promise<void> {
  for (const [p, text] of ARCHIVE) {
    await mkdir(path.dirname(path.join(root, p)), { recursive: true });
    await writeFile(path.join(root, p), text);
  }
}
