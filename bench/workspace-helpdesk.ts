import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import { CUSTOMERS, seeded } from './workspace-data.ts';

// Two databases that share no key but an email address, as a sales system and a helpdesk do: sales.db (the
// shop's customers as accounts, their invoices of 2025 and 2026) and helpdesk.db (tickets by requester email),
// each ticket's message in a file of its own (helpdesk/messages/<ticket id>.txt), as a helpdesk exports them.

const r = seeded(38);

export interface Invoice {
  id: string;
  account_id: number;
  issued_on: string;
  amount_cents: number;
  paid: number;
}

export const INVOICES: Invoice[] = CUSTOMERS.flatMap((_, i) =>
  Array.from({ length: r.int(4, 14) }, () => ({
    account_id: i + 1,
    issued_on: `${r.pick(['2025', '2026', '2026'])}-${String(r.int(1, 11)).padStart(2, '0')}-${String(r.int(1, 28)).padStart(2, '0')}`,
    amount_cents: r.int(40, 4800) * 100 + r.int(0, 99),
    paid: r.int(0, 4) > 0 ? 1 : 0,
  })),
)
  .sort((a, b) => a.issued_on.localeCompare(b.issued_on))
  .map((x, n) => ({ id: `INV-${x.issued_on.slice(0, 4)}-${String(n + 1).padStart(4, '0')}`, ...x }));

const SUBJECTS: [string, string][] = [
  ['Invoice charged twice', 'We were charged twice for invoice {inv}. Please refund the second payment.'],
  [
    'VAT number missing on invoice',
    'Our accountant needs our VAT number on invoice {inv}; can you reissue it?',
  ],
  ['Copy of an invoice', 'Could you send us a copy of invoice {inv}? The original email never arrived.'],
  ['Late delivery', 'The order we placed two weeks ago has still not arrived. When can we expect it?'],
  ['Wrong toner delivered', 'We ordered black toner and received cyan. Please send the right cartridges.'],
  ['Damaged parcel', 'Two of the boxes arrived crushed and the paper inside is wet. We need a replacement.'],
  ['Change delivery address', 'From next month please deliver to our new office; the old one closes.'],
  ['Credit note for a return', 'We returned the chairs on the 3rd and have not received a credit note yet.'],
];
const STATUSES = ['open', 'pending', 'closed', 'closed', 'closed'];

export interface Ticket {
  id: string;
  requester_email: string;
  subject: string;
  status: string;
  opened_on: string;
  message: string;
}

/** Tickets from the shop's customers and a few from addresses sales does not know. */
export const TICKETS: Ticket[] = Array.from({ length: 90 }, (_, n) => {
  const stranger = r.int(0, 9) === 0;
  const account = r.int(1, CUSTOMERS.length);
  const email = stranger ? `someone${n}@mail.example` : CUSTOMERS[account - 1].email;
  const invoices = INVOICES.filter((x) => x.account_id === account);
  const [subject, text] = r.pick(SUBJECTS);
  const inv = invoices.length > 0 ? r.pick(invoices).id : 'INV-2026-0001';
  const name = stranger ? 'A visitor' : CUSTOMERS[account - 1].name;
  return {
    id: `HD-${1000 + n}`,
    requester_email: email,
    subject,
    status: r.pick(STATUSES),
    opened_on: `2026-${String(r.int(6, 11)).padStart(2, '0')}-${String(r.int(1, 28)).padStart(2, '0')}`,
    message: `${text.replace('{inv}', inv)}\n\nKind regards,\n${name}\n`,
  };
});

/** The ten accounts with the most revenue invoiced in 2026, most first. */
export function topAccounts(): { name: string; email: string; cents: number }[] {
  return CUSTOMERS.map((c, i) => ({
    name: c.name,
    email: c.email,
    cents: INVOICES.filter((x) => x.account_id === i + 1 && x.issued_on >= '2026-01-01').reduce(
      (s, x) => s + x.amount_cents,
      0,
    ),
  }))
    .sort((a, b) => b.cents - a.cents)
    .slice(0, 10);
}

/** The open tickets of these emails, oldest first (then by id, as the query orders them). */
export const openTicketsOf = (emails: string[]) =>
  TICKETS.filter((t) => t.status === 'open' && emails.includes(t.requester_email)).sort(
    (a, b) => a.opened_on.localeCompare(b.opened_on) || a.id.localeCompare(b.id),
  );

/** Writes sales.db, helpdesk.db and helpdesk/messages/. */
export async function writeHelpdesk(root: string): Promise<void> {
  const sales = new Database(path.join(root, 'sales.db'));
  sales.exec(`CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE,
      country TEXT NOT NULL);
    CREATE TABLE invoices (id TEXT PRIMARY KEY, account_id INTEGER NOT NULL REFERENCES accounts(id),
      issued_on TEXT NOT NULL, amount_cents INTEGER NOT NULL, paid INTEGER NOT NULL);`);
  const addAccount = sales.prepare('INSERT INTO accounts VALUES (?, ?, ?, ?)');
  const addInvoice = sales.prepare('INSERT INTO invoices VALUES (?, ?, ?, ?, ?)');
  sales.transaction(() => {
    CUSTOMERS.forEach((c, i) => {
      addAccount.run(i + 1, c.name, c.email, c.country);
    });
    for (const x of INVOICES) addInvoice.run(x.id, x.account_id, x.issued_on, x.amount_cents, x.paid);
  })();
  sales.close();
  const helpdesk = new Database(path.join(root, 'helpdesk.db'));
  helpdesk.exec(`CREATE TABLE tickets (id TEXT PRIMARY KEY, requester_email TEXT NOT NULL, subject TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'pending', 'closed')), opened_on TEXT NOT NULL);`);
  const addTicket = helpdesk.prepare('INSERT INTO tickets VALUES (?, ?, ?, ?, ?)');
  helpdesk.transaction(() => {
    for (const t of TICKETS) addTicket.run(t.id, t.requester_email, t.subject, t.status, t.opened_on);
  })();
  helpdesk.close();
  await mkdir(path.join(root, 'helpdesk', 'messages'), { recursive: true });
  for (const t of TICKETS) await writeFile(path.join(root, 'helpdesk', 'messages', `${t.id}.txt`), t.message);
}
