import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import { HANDBOOK_PAGES, PAGE } from './site.ts';
import { writeArchive } from './workspace-archive.ts';
import { writeShop } from './workspace-data.ts';
import { writeHelpdesk } from './workspace-helpdesk.ts';

// What the benchmark's tasks work on, made fresh in a temp directory: a small project under git with one
// uncommitted change, a shop database, and a loopback web server with two pages; for the data-heavy tasks a
// shop's orders as files, the teams' reports, a sales and a helpdesk database (workspace-*.ts) and a handbook
// site (site.ts). Realistic sizes (a README, a few source files, a release note), so token counts reflect
// ordinary content rather than filler.

const README = `# invoice-tool

A command-line tool that turns a CSV export of orders into PDF invoices, one per customer.

## Usage

    invoice-tool --input orders.csv --out invoices/ --currency EUR

Each invoice lists the customer's orders of the month, the VAT per line and the total. Customers with
no orders that month get no invoice. Amounts are rounded half-even to the cent.

## Development

Run \`npm test\` for the unit tests and \`npm run lint\` before sending a change. Releases are cut from
main by tagging \`vX.Y.Z\`; the changelog lists every user-visible change.
`;

const APP = `import { readFileSync } from 'node:fs';
import { parseOrders } from './orders.js';
import { renderInvoice } from './render.js';

/** Reads the export, groups orders by customer and writes one invoice each. */
export function run(input: string, currency: string): string[] {
  const orders = parseOrders(readFileSync(input, 'utf8'));
  const byCustomer = new Map<string, typeof orders>();
  for (const order of orders) {
    const list = byCustomer.get(order.customer) ?? [];
    list.push(order);
    byCustomer.set(order.customer, list);
  }
  return [...byCustomer].map(([customer, list]) => renderInvoice(customer, list, currency));
}
`;

const ORDERS = `/** One line of the CSV export. */
export interface Order {
  customer: string;
  date: string;
  amount: number;
  vatRate: number;
}

/** Parses the export; the first line is the header. */
export function parseOrders(csv: string): Order[] {
  return csv
    .trim()
    .split('\\n')
    .slice(1)
    .map((line) => {
      const [customer, date, amount, vatRate] = line.split(',');
      return { customer, date, amount: Number(amount), vatRate: Number(vatRate) };
    });
}
`;

const CHANGELOG = `# Changelog

## 1.3.0
- Invoices show the VAT per line.
- \`--currency\` accepts any ISO 4217 code.

## 1.2.1
- Fixed rounding of totals above 10,000.
`;

const PAGES: Record<string, string> = {
  '/release-notes': PAGE(
    'invoice-tool 1.4.0 release notes',
    '<p>Version 1.4.0 adds credit notes: a negative order line now produces a credit note instead of an ' +
      'invoice. The CSV importer accepts semicolon-separated files, and the PDF renderer embeds its fonts.</p>' +
      '<h2>Upgrading</h2><p>No configuration changes are needed. Credit notes are numbered in their own series ' +
      'starting at CN-0001.</p>',
  ),
  '/vat-rates': PAGE(
    'Standard VAT rates',
    '<table><tr><th>Country</th><th>Rate</th></tr><tr><td>Germany</td><td>19%</td></tr>' +
      '<tr><td>France</td><td>20%</td></tr><tr><td>Netherlands</td><td>21%</td></tr>' +
      '<tr><td>Spain</td><td>21%</td></tr></table><p>Reduced rates apply to food and books.</p>',
  ),
  ...HANDBOOK_PAGES,
};

/** A loopback web server with the pages the web tasks read. */
export function startPages(): Promise<{ origin: string; host: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const page = PAGES[req.url ?? ''];
    res.writeHead(page ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
    res.end(page ?? PAGE('Page not found', '<p>There is no page at this address.</p>'));
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        origin: `http://127.0.0.1:${port}`,
        host: `127.0.0.1:${port}`,
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    }),
  );
}

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, {
    cwd,
    stdio: 'pipe',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 'Ann Example',
      GIT_AUTHOR_EMAIL: 'ann@example.com',
      GIT_COMMITTER_NAME: 'Ann Example',
      GIT_COMMITTER_EMAIL: 'ann@example.com',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
    },
  });

/**
 * Writes the project (a git repository with two commits and one uncommitted edit), the shop database, and
 * the data-heavy tasks' files and databases.
 */
export async function makeWorkspace(root: string): Promise<void> {
  const project = path.join(root, 'project');
  await mkdir(path.join(project, 'src'), { recursive: true });
  await writeFile(path.join(project, 'README.md'), README);
  await writeFile(path.join(project, 'src', 'app.ts'), APP);
  await writeFile(path.join(project, 'CHANGELOG.md'), CHANGELOG);
  git(project, 'init', '-q', '-b', 'main');
  git(project, 'add', '.');
  git(project, 'commit', '-q', '-m', 'Invoice tool: CSV to one invoice per customer');
  await writeFile(path.join(project, 'src', 'orders.ts'), ORDERS);
  git(project, 'add', '.');
  git(project, 'commit', '-q', '-m', 'Parse orders from the CSV export');
  await writeFile(path.join(project, 'src', 'app.ts'), APP.replace("'utf8'", "'utf8').replace(/\\r/g, ''"));

  const db = new Database(path.join(root, 'shop.db'));
  db.exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
    CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
      placed_on TEXT NOT NULL, amount_cents INTEGER NOT NULL);`);
  const customers = ['Ann', 'Bob', 'Chen', 'Dana', 'Emil'];
  const countries = ['DE', 'FR', 'NL', 'ES', 'DE'];
  const addCustomer = db.prepare('INSERT INTO customers (id, name, country) VALUES (?, ?, ?)');
  const addOrder = db.prepare('INSERT INTO orders (customer_id, placed_on, amount_cents) VALUES (?, ?, ?)');
  db.transaction(() => {
    customers.forEach((name, i) => {
      addCustomer.run(i + 1, name, countries[i]);
    });
    for (let i = 0; i < 40; i++)
      addOrder.run((i % 5) + 1, `2026-0${(i % 9) + 1}-1${i % 10}`, 1000 + ((i * 7919) % 50_000));
  })();
  db.close();
  await writeShop(root);
  await writeArchive(root);
  await writeHelpdesk(root);
}
