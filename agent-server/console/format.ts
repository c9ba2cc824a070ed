import { html } from 'hono/html';

// How the console's pages write times, numbers, ids, states and who did something: one place, so every page
// says them the same way (console.js follows the same rules for what it draws live).

/** A time on one line, to the second, in UTC (the whole ISO time in its tooltip). */
export const when = (iso: string | null | undefined) =>
  iso ? html`<time datetime="${iso}" title="${iso}">${iso.slice(0, 10)} ${iso.slice(11, 19)}</time>` : '';

const NUMBER = new Intl.NumberFormat('en-US');
/** A count with thousands separators. */
export const num = (n: number) => NUMBER.format(n);

/** `n thing(s)`, singular for one. */
export const plural = (n: number, one: string, many = `${one}s`) => `${num(n)} ${n === 1 ? one : many}`;

/** A long id cut to fit a table cell (the whole id is in the link or tooltip). */
export const short = (id: string) => (id.length > 18 ? `${id.slice(0, 17)}…` : id);

export const status = (s: string) => html`<span class="status s-${s}">${s.replace('_', ' ')}</span>`;

/**
 * An upstream toolset's health as a tag; a built-in toolset (the tool-server's own) has none of its own: it is
 * up when the tool-server is, which the overview shows.
 */
export const health = (h: string | undefined) =>
  h
    ? html`<span class="health h-${h}">${h}</span>`
    : html`<span class="muted built-in" title="served by the tool-server; its health is on the overview">built in</span>`;

/** The credentials' roles as the console names them (the gateway records `admin`, `user (AGENT_API_TOKEN)`). */
const ACTORS: Record<string, string> = {
  admin: 'operator (GATEWAY_ADMIN_TOKEN)',
  'user (AGENT_API_TOKEN)': 'approver (AGENT_API_TOKEN)',
  user: 'approver (AGENT_API_TOKEN)',
  local: 'operator (no tokens set)',
};
/** Who decided, as a person reads it. */
export const who = (by: string | null | undefined) => (by ? (ACTORS[by] ?? by) : 'nobody');
