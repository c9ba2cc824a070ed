import { GUIDE_LINKS, sharedGuideLinks } from './site.ts';
import type { BenchTask } from './task-types.ts';
import { largestArchiveFiles } from './workspace-archive.ts';
import { CUSTOMERS, customerTotals, orderedSkus } from './workspace-data.ts';
import { openTicketsOf, TICKETS, topAccounts } from './workspace-helpdesk.ts';

// The four data-heavy tasks: each needs several dependent rounds of tool calls, each round's calls named by
// what the one before returned. Native mode (and the arms derived from it) makes the independent calls of a
// round in one reply, as parallel tool calls; code mode writes one script where the goal tells it the data's
// shape, after one small look where it does not (d04: the databases' columns). Both see the same data and
// give the same answer; the calls and the answer are computed from the data workspace-*.ts writes.

const fs = 'file_system_tools';
const db = 'database_tools';
const eur = (cents: number) =>
  `€${(cents / 100).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
const chunks = <T>(xs: T[], size: number) =>
  Array.from({ length: Math.ceil(xs.length / size) }, (_, i) => xs.slice(i * size, (i + 1) * size));

function orderTotals(): BenchTask {
  const totals = customerTotals();
  const ranked = [...CUSTOMERS].sort((a, b) => (totals.get(b.id) ?? 0) - (totals.get(a.id) ?? 0));
  const products = chunks(
    orderedSkus().map((sku) => `shop/products/${sku}.json`),
    50,
  );
  return {
    key: 'd01-order-totals',
    goal:
      'Total what each of the 30 customers in shop/ spent in 2026. shop/customers.json lists them ([{id, name, ' +
      '…}]), shop/orders/<customer id>.json holds each one’s orders ({orders: [{id, placed_on, lines: [{sku, ' +
      'qty}]}]}) and shop/products/<sku>.json gives each product’s price_eur.',
    turns: [
      [{ activate: [fs] }],
      [{ tool: 'read_text_file', args: { path: 'shop/customers.json' } }],
      [{ tool: 'read_multiple_files', args: { paths: CUSTOMERS.map((c) => `shop/orders/${c.id}.json`) } }],
      [...products.map((paths) => ({ tool: 'read_multiple_files', args: { paths } })), { deactivate: [fs] }],
    ],
    code: [
      [{ activate: [fs] }],
      [
        {
          run: [
            "const customers = JSON.parse((await read_text_file({ path: 'shop/customers.json' })).content);",
            'const read = async (paths) => {',
            '  const parts = [];',
            '  for (let i = 0; i < paths.length; i += 50)',
            '    parts.push(read_multiple_files({ paths: paths.slice(i, i + 50) }));',
            '  return (await Promise.all(parts)).flatMap((r) => r.files.map((f) => JSON.parse(f.content)));',
            '};',
            "const orders = await read(customers.map((c) => 'shop/orders/' + c.id + '.json'));",
            'const skus = [...new Set(orders.flatMap((o) => o.orders.flatMap((x) => x.lines.map((l) => l.sku))))];',
            'const cents = {};',
            "for (const p of await read(skus.map((s) => 'shop/products/' + s + '.json')))",
            '  cents[p.sku] = Math.round(p.price_eur * 100);',
            'customers.forEach((c, i) => {',
            '  const lines = orders[i].orders.flatMap((x) => x.lines);',
            '  const total = lines.reduce((sum, l) => sum + l.qty * cents[l.sku], 0);',
            "  print(c.id + ' ' + c.name + ': ' + (total / 100).toFixed(2) + ' EUR');",
            '});',
          ].join('\n'),
        },
        { deactivate: [fs] },
      ],
    ],
    answer: [
      'What each customer spent in 2026 (quantity × price over all order lines):',
      ...CUSTOMERS.map((c) => `- ${c.name} (${c.id}): ${eur(totals.get(c.id) ?? 0)}`),
      `Most: ${ranked[0].name}, ${eur(totals.get(ranked[0].id) ?? 0)}; least: ${ranked.at(-1)?.name}, ` +
        `${eur(totals.get(ranked.at(-1)?.id ?? '') ?? 0)}.`,
    ].join('\n'),
    dataHeavy: true,
  };
}

function largestFiles(): BenchTask {
  const largest = largestArchiveFiles();
  return {
    key: 'd02-largest-files',
    goal: 'Which five files are the largest across the folders of archive/, and what is the first line of each?',
    turns: [
      [{ activate: [fs] }],
      [{ tool: 'list_directory', args: { path: 'archive' } }],
      ['engineering', 'sales', 'support'].map((d) => ({
        tool: 'list_directory_with_sizes',
        args: { path: `archive/${d}`, sort_by: 'size' },
      })),
      [
        ...largest.map((f) => ({ tool: 'read_text_file', args: { path: f.path, head: 1 } })),
        { deactivate: [fs] },
      ],
    ],
    code: [
      [{ activate: [fs] }],
      [
        {
          run: [
            "const dirs = (await list_directory({ path: 'archive' })).entries.filter((e) => e.type === 'directory');",
            'const listed = await Promise.all(',
            "  dirs.map((d) => list_directory_with_sizes({ path: 'archive/' + d.name, sort_by: 'size' })),",
            ');',
            'const files = listed.flatMap((l, i) =>',
            "  l.entries.filter((e) => e.type === 'file').map((e) => ({ path: 'archive/' + dirs[i].name + '/' + e.name, size: e.size_bytes })),",
            ');',
            'const top = files.sort((a, b) => b.size - a.size).slice(0, 5);',
            'const heads = await Promise.all(top.map((f) => read_text_file({ path: f.path, head: 1 })));',
            "top.forEach((f, i) => print(f.path + ' (' + f.size + ' bytes): ' + heads[i].content.trim()));",
          ].join('\n'),
        },
        { deactivate: [fs] },
      ],
    ],
    answer: [
      'The five largest files in archive/, largest first:',
      ...largest.map((f, i) => `${i + 1}. ${f.path} (${f.size} bytes): "${f.first.replace(/^# /, '')}"`),
    ].join('\n'),
    dataHeavy: true,
  };
}

function sharedLinks(pages: string): BenchTask {
  const { shared, broken } = sharedGuideLinks();
  const text = new Map(GUIDE_LINKS['2026']);
  return {
    key: 'd03-shared-links',
    goal:
      `The team handbook at ${pages}/handbook links to this year's and last year's onboarding guides. Which ` +
      'links do the two guides have in common, and which of those are broken?',
    turns: [
      [{ activate: ['web_tools'] }],
      [{ tool: 'fetch_url', args: { url: `${pages}/handbook` } }],
      ['2026', '2025'].map((year) => ({
        tool: 'fetch_url',
        args: { url: `${pages}/guides/onboarding-${year}` },
      })),
      [
        ...shared.map((p) => ({ tool: 'fetch_url', args: { url: `${pages}${p}`, max_chars: 200 } })),
        { deactivate: ['web_tools'] },
      ],
    ],
    code: [
      [{ activate: ['web_tools'] }],
      [
        {
          run: [
            `const origin = '${pages}';`,
            "const absolute = (u) => (u.startsWith('http') ? u : origin + u);",
            'const linksOf = (md) => [...new Set([...md.matchAll(/\\]\\(([^)\\s]+)\\)/g)].map((m) => absolute(m[1])))];',
            "const handbook = await fetch_url({ url: origin + '/handbook' });",
            'const guides = [...handbook.markdown.matchAll(/\\[onboarding guide[^\\]]*\\]\\(([^)\\s]+)\\)/gi)].map((m) => absolute(m[1]));',
            "print('guides: ' + guides.join(', '));",
            'const [a, b] = await Promise.all(guides.map((url) => fetch_url({ url })));',
            'const inB = linksOf(b.markdown);',
            'const shared = linksOf(a.markdown).filter((u) => inB.includes(u));',
            'const checked = await Promise.all(shared.map((url) => fetch_url({ url, max_chars: 200 })));',
            "checked.forEach((p, i) => print(p.status + ' ' + shared[i] + (p.status === 200 ? ' (' + p.title + ')' : '')));",
          ].join('\n'),
        },
        { deactivate: ['web_tools'] },
      ],
    ],
    answer:
      `The two onboarding guides share ${shared.length} links: ` +
      `${shared.map((p) => `${text.get(p)} (${p})`).join(', ')}. ${broken.length} of them are broken (404): ` +
      `${broken.map((p) => `${text.get(p)} (${p})`).join(' and ')}.`,
    dataHeavy: true,
  };
}

const TOP_SQL =
  'SELECT a.name, a.email, SUM(i.amount_cents) / 100.0 AS revenue FROM invoices i JOIN accounts a ON ' +
  "a.id = i.account_id WHERE i.issued_on >= '2026-01-01' GROUP BY a.id ORDER BY revenue DESC LIMIT 10";
const ticketsSql = (n: number) =>
  'SELECT id, requester_email, subject, opened_on FROM tickets WHERE status = ? AND requester_email IN ' +
  `(${Array.from({ length: n }, () => '?').join(', ')}) ORDER BY opened_on, id`;

function openTickets(): BenchTask {
  const top = topAccounts();
  const emails = top.map((a) => a.email);
  const open = openTicketsOf(emails);
  const nameOf = new Map(top.map((a) => [a.email, a.name]));
  const quiet = top.filter((a) => !open.some((t) => t.requester_email === a.email)).map((a) => a.name);
  const firstLine = (id: string) => TICKETS.find((t) => t.id === id)?.message.split('\n')[0] ?? '';
  return {
    key: 'd04-open-tickets',
    goal:
      'Of the ten accounts with the most revenue invoiced in 2026 in sales.db, which have open tickets in ' +
      'helpdesk.db, and what did they write? Each ticket’s message is in helpdesk/messages/<ticket id>.txt.',
    turns: [
      [{ activate: [db, fs] }],
      ['sales.db', 'helpdesk.db'].map((path) => ({ tool: 'list_tables', args: { path } })),
      [
        ['sales.db', 'accounts'],
        ['sales.db', 'invoices'],
        ['helpdesk.db', 'tickets'],
      ].map(([path, table]) => ({ tool: 'describe_table', args: { path, table } })),
      [{ tool: 'query', args: { path: 'sales.db', sql: TOP_SQL } }],
      [
        {
          tool: 'query',
          args: { path: 'helpdesk.db', sql: ticketsSql(emails.length), params: ['open', ...emails] },
        },
      ],
      [
        { tool: 'read_multiple_files', args: { paths: open.map((t) => `helpdesk/messages/${t.id}.txt`) } },
        { deactivate: [db, fs] },
      ],
    ],
    code: [
      [{ activate: [db, fs] }],
      [
        {
          run: [
            "for (const path of ['sales.db', 'helpdesk.db']) {",
            '  for (const t of (await list_tables({ path })).tables) {',
            '    const d = await describe_table({ path, table: t.name });',
            "    print(path + ' ' + t.name + ' (' + d.row_count + ' rows): ' + d.columns.map((c) => c.name + ' ' + c.type).join(', '));",
            '  }',
            '}',
          ].join('\n'),
        },
      ],
      [
        {
          run: [
            `const top = (await query({ path: 'sales.db', sql: ${JSON.stringify(TOP_SQL)} })).rows;`,
            'const emails = top.map((r) => r[1]);',
            'const sql =',
            "  'SELECT id, requester_email, subject, opened_on FROM tickets WHERE status = ? AND requester_email IN (' +",
            "  emails.map(() => '?').join(', ') + ') ORDER BY opened_on, id';",
            "const open = (await query({ path: 'helpdesk.db', sql, params: ['open', ...emails] })).rows;",
            "const messages = await read_multiple_files({ paths: open.map((t) => 'helpdesk/messages/' + t[0] + '.txt') });",
            'open.forEach((t, i) => {',
            '  const name = top.find((r) => r[1] === t[1])[0];',
            "  print(name + ': ' + t[0] + ' \"' + t[2] + '\" (opened ' + t[3] + '): ' + messages.files[i].content.trim());",
            '});',
            "print('no open tickets: ' + top.filter((r) => !open.some((t) => t[1] === r[1])).map((r) => r[0]).join(', '));",
          ].join('\n'),
        },
        { deactivate: [db, fs] },
      ],
    ],
    answer: [
      `${open.length} of the ten largest accounts of 2026 have open tickets:`,
      ...open.map(
        (t) =>
          `- ${nameOf.get(t.requester_email)}, ${t.id} "${t.subject}" (opened ${t.opened_on}): "${firstLine(t.id)}"`,
      ),
      `The other ${quiet.length} (${quiet.join(', ')}) have none open.`,
    ].join('\n'),
    dataHeavy: true,
  };
}

/** The data-heavy tasks; `pages` is the web server's origin. */
export function dataTasks(pages: string): BenchTask[] {
  return [orderTotals(), largestFiles(), sharedLinks(pages), openTickets()];
}
