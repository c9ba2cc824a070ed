// The team handbook the link-comparison task reads from the loopback web server (workspace.ts startPages): an
// index page, last year's and this year's onboarding guides, and the pages they link to. The IT team renamed
// two pages since 2025 and both guides still link to the old addresses: those links are broken (404).

/** An HTML page as a small site serves it. */
export const PAGE = (title: string, body: string) =>
  `<!doctype html><html><head><title>${title}</title></head><body><article><h1>${title}</h1>${body}</article></body></html>`;

const link = (href: string, text: string) => `<a href="${href}">${text}</a>`;

/** The pages the guides link to that exist, by path, with their text. */
const DOCS: Record<string, [string, string]> = {
  '/docs/accounts': [
    'Your accounts',
    'IT creates your email, chat and shop-admin accounts before your first day.',
  ],
  '/docs/security-training': [
    'Security training',
    'A 40-minute course on phishing and passwords, due in week one.',
  ],
  '/docs/expenses': [
    'Expenses',
    'Submit receipts within 30 days; the finance team pays them with the next salary.',
  ],
  '/docs/holidays': [
    'Holidays',
    'Twenty-eight days a year; book them in the HR tool at least two weeks ahead.',
  ],
  '/docs/payroll': ['Payroll dates', 'Salaries are paid on the 25th, or the working day before it.'],
  '/docs/org-chart': ['Who is who', 'Sales, support, warehouse and engineering, with each team lead.'],
  '/docs/sick-leave': ['Sick leave', 'Tell your lead before 9:00; a doctor’s note from the fourth day.'],
  '/docs/office-map': ['Office map', 'Two floors: the warehouse below, desks and the kitchen above.'],
  '/docs/fax-setup': ['Fax', 'The fax line forwards to the shared inbox; no machine to set up.'],
  '/docs/intranet': ['Intranet', 'The old intranet is read-only; its news moved to the chat.'],
  '/docs/chat': ['Chat', 'Join #general, #orders and your team’s channel.'],
  '/docs/password-manager': ['Password manager', 'Every shared password lives in the team vault.'],
  '/docs/sso': ['Single sign-on', 'One log-in for email, chat, the HR tool and the shop admin.'],
  '/docs/network-access': [
    'Network access',
    'The office network and the remote-access client, both with SSO.',
  ],
  '/docs/device-setup': [
    'Device setup',
    'Laptops arrive enrolled; sign in with SSO and updates install themselves.',
  ],
};

/** Links of a guide, in order: [path, text]. */
type GuideLinks = [string, string][];

const SHARED: GuideLinks = [
  ['/docs/accounts', 'your accounts'],
  ['/docs/vpn', 'connect to the VPN'],
  ['/docs/laptop-setup', 'set up your laptop'],
  ['/docs/security-training', 'the security training'],
  ['/docs/org-chart', 'who is who'],
  ['/docs/expenses', 'how expenses work'],
  ['/docs/payroll', 'when salaries are paid'],
  ['/docs/holidays', 'how to book holidays'],
];

export const GUIDE_LINKS: Record<'2025' | '2026', GuideLinks> = {
  '2025': [
    ...SHARED.slice(0, 3),
    ['/docs/fax-setup', 'the fax line'],
    ...SHARED.slice(3),
    ['/docs/intranet', 'the intranet'],
  ],
  '2026': [
    ['/docs/sso', 'single sign-on'],
    ...SHARED.slice(0, 4),
    ['/docs/password-manager', 'the password manager'],
    ['/docs/chat', 'the chat'],
    ...SHARED.slice(4),
  ],
};

/** The paths both guides link to, in the order of this year's guide, and those of them that are missing. */
export function sharedGuideLinks(): { shared: string[]; broken: string[] } {
  const last = new Set(GUIDE_LINKS['2025'].map(([p]) => p));
  const shared = GUIDE_LINKS['2026'].map(([p]) => p).filter((p) => last.has(p));
  return { shared, broken: shared.filter((p) => !(p in DOCS)) };
}

function guide(year: '2025' | '2026'): string {
  const links = GUIDE_LINKS[year];
  const third = Math.ceil(links.length / 3);
  const step = (title: string, part: GuideLinks) =>
    `<h2>${title}</h2><ul>${part.map(([p, text]) => `<li>Read about ${link(p, text)}.</li>`).join('')}</ul>`;
  return PAGE(
    `Onboarding guide ${year}`,
    `<p>Welcome! This guide walks you through your first weeks. Your lead has a copy and will check in on Fridays.</p>` +
      step('Before your first day', links.slice(0, third)) +
      step('Your first week', links.slice(third, 2 * third)) +
      step('Your first month', links.slice(2 * third)) +
      '<p>Questions? Ask in the team channel; your lead is there for exactly that.</p>',
  );
}

/** The handbook's pages by path. */
export const HANDBOOK_PAGES: Record<string, string> = {
  '/handbook': PAGE(
    'Team handbook',
    '<p>How we work at the shop: what to read first, money, time off, IT and the office.</p>' +
      `<h2>Getting started</h2><ul><li>${link('/guides/onboarding-2026', 'Onboarding guide 2026')}: start here.</li>` +
      `<li>${link('/guides/onboarding-2025', 'Onboarding guide 2025')} (previous edition, kept for reference).</li>` +
      `<li>${link('/docs/org-chart', 'Who is who')}</li></ul>` +
      `<h2>Money</h2><ul><li>${link('/docs/expenses', 'Expenses')}</li><li>${link('/docs/payroll', 'Payroll dates')}</li></ul>` +
      `<h2>Time off</h2><ul><li>${link('/docs/holidays', 'Holidays')}</li><li>${link('/docs/sick-leave', 'Sick leave')}</li></ul>` +
      `<h2>IT</h2><ul><li>${link('/docs/sso', 'Single sign-on')}</li><li>${link('/docs/network-access', 'Network access')}</li>` +
      `<li>${link('/docs/device-setup', 'Device setup')}</li></ul>` +
      `<h2>Office</h2><ul><li>${link('/docs/office-map', 'Office map')}</li></ul>`,
  ),
  '/guides/onboarding-2025': guide('2025'),
  '/guides/onboarding-2026': guide('2026'),
  ...Object.fromEntries(Object.entries(DOCS).map(([p, [title, text]]) => [p, PAGE(title, `<p>${text}</p>`)])),
};
