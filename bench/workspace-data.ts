import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

// The data the data-heavy tasks work on (data-tasks.ts), made the same on every run from a seeded generator:
// here an office-supplies shop's customers, their 2026 orders and its products as JSON files (shop/); the
// teams' reports in workspace-archive.ts, the sales and helpdesk databases in workspace-helpdesk.ts. The tasks'
// scripted calls and answers are computed from these same values, so they always match what is on disk.

/** A small seeded generator (mulberry32): the same data on every run. */
export function seeded(seed: number) {
  let a = seed;
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)];
  return { int, pick };
}

const PRODUCT_LINES: [string, string, number, string[]][] = [
  [
    'PAP',
    'Copy paper',
    5.49,
    ['A4 80 g, 500 sheets', 'A4 100 g, 500 sheets', 'A3 80 g, 500 sheets', 'A4 recycled'],
  ],
  ['TON', 'Toner cartridge', 64.9, ['black, 2,500 pages', 'black, 6,000 pages', 'cyan', 'magenta', 'yellow']],
  ['PEN', 'Ballpoint pens', 3.2, ['blue, box of 10', 'black, box of 10', 'red, box of 10']],
  ['GEL', 'Gel pens', 7.9, ['blue, box of 12', 'black, box of 12']],
  ['MRK', 'Whiteboard markers', 6.5, ['4 colours', 'black, box of 10']],
  ['HLT', 'Highlighters', 5.95, ['yellow, box of 10', '6 colours']],
  ['NTB', 'Notebook', 4.8, ['A5 ruled', 'A5 dotted', 'A4 squared']],
  ['FLD', 'Lever arch file', 3.75, ['A4, 80 mm', 'A4, 50 mm']],
  ['ENV', 'Envelopes', 18.9, ['DL, box of 500', 'C4, box of 250', 'C5, box of 500']],
  ['LBL', 'Address labels', 21.5, ['70 x 36 mm, 2,400 labels', '99.1 x 38.1 mm, 1,400 labels']],
  ['STP', 'Stapler', 12.9, ['desktop, 25 sheets', 'heavy duty, 100 sheets']],
  ['STA', 'Staples', 2.4, ['24/6, box of 5,000', '23/10, box of 1,000']],
  ['TAP', 'Packing tape', 9.8, ['brown, 6 rolls', 'clear, 6 rolls']],
  ['BOX', 'Shipping boxes', 17.5, ['small, pack of 20', 'medium, pack of 20', 'large, pack of 10']],
  ['BAT', 'Batteries', 11.9, ['AA, pack of 24', 'AAA, pack of 24']],
  ['CAB', 'USB-C cable', 8.9, ['1 m', '2 m']],
  ['MOU', 'Wireless mouse', 24.9, ['standard', 'ergonomic']],
  ['HDS', 'Headset', 39, ['USB, stereo', 'Bluetooth, with microphone']],
  ['CHR', 'Office chair', 189, ['task chair', 'ergonomic, with headrest']],
];

export interface Product {
  sku: string;
  name: string;
  price_eur: number;
  unit: string;
}

export const PRODUCTS: Product[] = PRODUCT_LINES.flatMap(([code, name, price, variants]) =>
  variants.map((variant, i) => ({
    sku: `${code}-${String(i + 1).padStart(2, '0')}`,
    name: `${name}, ${variant}`,
    price_eur: Math.round(price * (1 + 0.15 * i) * 100) / 100,
    unit: code === 'CHR' || code === 'STP' || code === 'MOU' || code === 'HDS' ? 'piece' : 'pack',
  })),
);

const COMPANIES: [string, string][] = [
  ['Berger Architekten', 'DE'],
  ['Atelier Moreau', 'FR'],
  ['Van Dijk Logistiek', 'NL'],
  ['Estudio Navarro', 'ES'],
  ['Kanzlei Hofmann', 'DE'],
  ['Café Lindqvist', 'DE'],
  ['Praxis Dr. Yilmaz', 'AT'],
  ['Imprimerie Lefèvre', 'FR'],
  ['De Smet Accountancy', 'BE'],
  ['Studio Bianchi', 'IT'],
  ['Nowak Transport', 'PL'],
  ['Schneider Elektro', 'DE'],
  ['Maison Girard', 'FR'],
  ['Bakkerij Jansen', 'NL'],
  ['Clínica Ortega', 'ES'],
  ['Weber & Söhne', 'DE'],
  ['Galerie Fontaine', 'FR'],
  ['Peeters Bouw', 'BE'],
  ['Ristorante Greco', 'IT'],
  ['Kowalski Software', 'PL'],
  ['Hotel Alpenblick', 'AT'],
  ['Fischer Immobilien', 'DE'],
  ['Librairie Dubois', 'FR'],
  ['Mulder Tuinen', 'NL'],
  ['Taller Romero', 'ES'],
  ['Zahnarzt Keller', 'DE'],
  ['Agence Rousseau', 'FR'],
  ['Vermeulen Advocaten', 'BE'],
  ['Farmacia Conti', 'IT'],
  ['Wiśniewski Design', 'PL'],
];

export interface Customer {
  id: string;
  name: string;
  email: string;
  country: string;
}

export const CUSTOMERS: Customer[] = COMPANIES.map(([name, country], i) => ({
  id: `C${String(i + 1).padStart(2, '0')}`,
  name,
  email: `office@${name
    .normalize('NFD')
    .replace(/[^A-Za-z ]/g, '')
    .trim()
    .toLowerCase()
    .replace(/ +/g, '-')}.example`,
  country,
}));

export interface Order {
  id: string;
  placed_on: string;
  lines: { sku: string; qty: number }[];
}

const day = (month: number, d: number) =>
  `2026-${String(month).padStart(2, '0')}-${String(d).padStart(2, '0')}`;

/** Each customer's 2026 orders, from a catalog of products most customers buy and some they rarely do. */
export const ORDERS: Record<string, Order[]> = (() => {
  const r = seeded(2026);
  const staples = PRODUCTS.filter((p) => /^(PAP|TON|PEN|ENV|STA|BOX|TAP)/.test(p.sku)).slice(0, 12);
  let n = 0;
  return Object.fromEntries(
    CUSTOMERS.map((c) => {
      const orders = Array.from({ length: r.int(2, 5) }, () => ({ month: r.int(1, 11), d: r.int(1, 28) }))
        .sort((a, b) => a.month - b.month || a.d - b.d)
        .map(({ month, d }) => {
          const skus = new Set(
            Array.from({ length: r.int(1, 4) }, () => r.pick(r.int(0, 2) ? staples : PRODUCTS).sku),
          );
          const lines = [...skus].map((sku) => ({
            sku,
            qty: sku.startsWith('CHR') ? r.int(1, 2) : r.int(1, 12),
          }));
          return { id: `SO-26-${String(++n).padStart(4, '0')}`, placed_on: day(month, d), lines };
        });
      return [c.id, orders];
    }),
  );
})();

/** What each customer spent in 2026, in cents. */
export function customerTotals(): Map<string, number> {
  const price = new Map(PRODUCTS.map((p) => [p.sku, Math.round(p.price_eur * 100)]));
  return new Map(
    CUSTOMERS.map((c) => [
      c.id,
      ORDERS[c.id].flatMap((o) => o.lines).reduce((sum, l) => sum + l.qty * (price.get(l.sku) ?? 0), 0),
    ]),
  );
}

/** The SKUs the orders name, in the order they first appear. */
export const orderedSkus = () => [
  ...new Set(CUSTOMERS.flatMap((c) => ORDERS[c.id].flatMap((o) => o.lines.map((l) => l.sku)))),
];

/** Writes shop/: customers.json, orders/<customer id>.json, products/<sku>.json. */
export async function writeShop(root: string): Promise<void> {
  const shop = path.join(root, 'shop');
  await mkdir(path.join(shop, 'orders'), { recursive: true });
  await mkdir(path.join(shop, 'products'), { recursive: true });
  const json = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;
  await writeFile(path.join(shop, 'customers.json'), json(CUSTOMERS));
  for (const c of CUSTOMERS)
    await writeFile(
      path.join(shop, 'orders', `${c.id}.json`),
      json({ customer: c.id, orders: ORDERS[c.id] }),
    );
  for (const p of PRODUCTS) await writeFile(path.join(shop, 'products', `${p.sku}.json`), json(p));
}
