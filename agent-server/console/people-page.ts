import { html } from 'hono/html';
import type { z } from 'zod';
import type { KeyInfo, TeamInfo, UsageLimits, UserInfo } from '../../mcp-gateway/contract.ts';
import { num, plural, when } from './format.ts';
import type { Html } from './pages.ts';

// The operator's people page: users, their keys and the teams, as the gateway's admin API lists them, with the
// forms and buttons that change them (people-actions.ts relays them). Names are the API's strict form, but emails
// and labels are anyone's text: hono/html escapes every one. A new key's secret is never drawn here: console.js
// shows it once, from the answer of the request that made it.

export interface People {
  users: z.infer<typeof UserInfo>[];
  keys: z.infer<typeof KeyInfo>[];
  teams: z.infer<typeof TeamInfo>[];
}

/** The most rows of each list the page draws: the CLI lists them all. */
export const PEOPLE_SHOWN = 500;

const ACTIONS = '/console/actions/people';
const part = encodeURIComponent;

/** The page; `now` judges which keys have expired. */
export function peoplePage(people: People, now = Date.now()): Html {
  const users = people.users.slice(0, PEOPLE_SHOWN);
  return html`<div class="new-key" data-result="key" role="status" hidden></div>
    <datalist id="people-users">${users.map((u) => html`<option value="${u.name}"></option>`)}</datalist>
    <h2>Users</h2>
    <form class="filters" data-json="${ACTIONS}/users" data-then="reload" autocomplete="off">
      <label>Name <input name="name" required maxlength="64" placeholder="alice" /></label>
      <label>Email <input name="email" type="email" maxlength="320" placeholder="optional" /></label>
      <button type="submit">Add user</button>
    </form>
    ${more(people.users.length, 'user', 'users list')}
    ${users.length === 0 ? html`<p class="muted">No users yet: add the first above.</p>` : usersTable(users, people.keys)}
    <h2>Keys</h2>
    ${users.length === 0 ? '' : keyForm}
    ${more(people.keys.length, 'key', 'keys list')}
    ${people.keys.length === 0 ? html`<p class="muted">No keys yet.</p>` : keysTable(people.keys.slice(0, PEOPLE_SHOWN), now)}
    <h2>Teams</h2>
    <form class="filters" data-json="${ACTIONS}/teams" data-then="reload" autocomplete="off">
      <label>Name <input name="name" required maxlength="64" placeholder="eng" /></label>
      <button type="submit">Add team</button>
    </form>
    ${more(people.teams.length, 'team', 'teams list')}
    ${people.teams.length === 0 ? html`<p class="muted">No teams yet.</p>` : teamsTable(people.teams.slice(0, PEOPLE_SHOWN))}`;
}

/** Said when a list is longer than the page draws. */
const more = (count: number, what: string, command: string) =>
  count > PEOPLE_SHOWN
    ? html`<p class="flash warn" role="status">${plural(count, what)}: the first ${num(PEOPLE_SHOWN)} are shown; <code>npx toolshift ${command}</code> lists every one.</p>`
    : '';

function usersTable(users: People['users'], keys: People['keys']) {
  const live = (name: string) => keys.filter((k) => k.user === name && !k.revoked_at).length;
  return html`<div class="scroll"><table class="fit people">
    <thead><tr><th>Name</th><th>Email</th><th>Teams</th><th class="wide">Limits</th><th class="num">Keys</th><th class="wide">Created</th><th></th></tr></thead>
    <tbody>
      ${users.map(
        (u) => html`<tr data-user="${u.name}">
          <td><strong>${u.name}</strong></td>
          <td class="clip">${u.email ?? ''}</td>
          <td>${u.teams.join(', ')}</td>
          <td class="wide">${limitsText(u.limits)}</td>
          <td class="num">${num(live(u.name))}</td>
          <td class="wide">${when(u.created_at)}</td>
          <td class="nowrap">${changeButton(
            `${ACTIONS}/users/${part(u.name)}/remove`,
            'Remove',
            `Remove user ${u.name}? Their keys are refused from then on, on every service.`,
          )}</td>
        </tr>`,
      )}
    </tbody>
  </table></div>`;
}

/** Making a key: its secret is in the answer only, which console.js shows in the box at the top, once. */
const keyForm = html`<form class="filters" data-json="${ACTIONS}/keys" data-show="key" autocomplete="off">
    <label>User <input name="user" list="people-users" required maxlength="64" /></label>
    <label
      >Role
      <select name="role">
        <option value="viewer">viewer</option>
        <option value="runner" selected>runner</option>
        <option value="approver">approver</option>
        <option value="operator">operator</option>
      </select>
    </label>
    <label>Expires in <input name="expires_in" maxlength="6" placeholder="never, or 30d, 12h" /></label>
    <label>Label <input name="label" maxlength="200" placeholder="optional" /></label>
    <button type="submit">Create key</button>
  </form>`;

function keysTable(keys: People['keys'], now: number) {
  return html`<div class="scroll"><table class="fit keys">
    <thead><tr><th>Key</th><th>User</th><th>Role</th><th>Label</th><th class="wide">Expires</th><th class="wide">Last used</th><th>State</th><th></th></tr></thead>
    <tbody>
      ${keys.map(
        (k) => html`<tr data-key="${k.id}">
          <td><code>${k.id}</code></td>
          <td>${k.user}</td>
          <td>${k.role}</td>
          <td class="clip">${k.label ?? ''}</td>
          <td class="wide">${k.expires_at ? when(k.expires_at) : html`<span class="muted">never</span>`}</td>
          <td class="wide">${k.last_used_at ? when(k.last_used_at) : html`<span class="muted">never</span>`}</td>
          <td class="nowrap">${keyState(k, now)}</td>
          <td class="nowrap">${
            k.revoked_at
              ? ''
              : changeButton(
                  `${ACTIONS}/keys/${part(k.id)}/revoke`,
                  'Revoke',
                  `Revoke key ${k.id} of ${k.user}? It is refused from then on, on every service.`,
                )
          }</td>
        </tr>`,
      )}
    </tbody>
  </table></div>`;
}

/** Whether a key still opens anything, and if not, why. */
function keyState(k: People['keys'][number], now: number) {
  if (k.revoked_at) return html`<span class="tag refused">revoked</span> ${when(k.revoked_at)}`;
  if (k.user === '(removed)') return html`<span class="tag refused">user removed</span>`;
  if (k.expires_at && Date.parse(k.expires_at) <= now) return html`<span class="tag refused">expired</span>`;
  return html`<span class="tag ok">active</span>`;
}

function teamsTable(teams: People['teams']) {
  return html`<div class="scroll"><table class="fit teams">
    <thead><tr><th>Team</th><th>Members</th><th class="wide">Limits</th><th>Disabled toolsets</th><th>Policy</th><th class="wide">Created</th><th></th></tr></thead>
    <tbody>
      ${teams.map(
        (t) => html`<tr data-team="${t.name}">
          <td><strong>${t.name}</strong></td>
          <td>
            <ul class="members">
              ${t.members.map(
                (m) =>
                  html`<li>${m} ${changeButton(
                    `${ACTIONS}/teams/${part(t.name)}/members/${part(m)}/remove`,
                    '×',
                    undefined,
                    `Take ${m} out of ${t.name}`,
                  )}</li>`,
              )}
            </ul>
            <form class="member" data-json="${ACTIONS}/teams/${part(t.name)}/members" data-then="reload" autocomplete="off">
              <input name="user" list="people-users" required maxlength="64" placeholder="user" aria-label="User to add to ${t.name}" />
              <button type="submit" class="secondary">Add</button>
            </form>
          </td>
          <td class="wide">${limitsText(t.limits)}</td>
          <td>${t.disabled_toolsets.join(', ') || html`<span class="muted">none</span>`}</td>
          <td>${t.policy === null ? html`<span class="muted">none</span>` : html`<span class="tag">set</span>`}</td>
          <td class="wide">${when(t.created_at)}</td>
          <td class="nowrap">${changeButton(
            `${ACTIONS}/teams/${part(t.name)}/remove`,
            'Remove',
            `Remove team ${t.name}? Its members stay users; its limits, ceiling and policy go.`,
          )}</td>
        </tr>`,
      )}
    </tbody>
  </table></div>`;
}

const LIMIT_WORDS = [
  ['tasks_per_hour', 'tasks/hour'],
  ['model_tokens_per_day', 'tokens/day'],
  ['tool_calls_per_minute', 'tool calls/min'],
] as const;

/** A user's or team's limits in words, as the CLI's flags name them. */
function limitsText(limits: z.infer<typeof UsageLimits>) {
  const set = LIMIT_WORDS.flatMap(([name, words]) => {
    const v = limits[name];
    return v == null ? [] : [`${num(v)} ${words}`];
  });
  return set.length > 0 ? set.join(' · ') : html`<span class="muted">none</span>`;
}

/**
 * A button that posts to `url` (console.js adds the CSRF token) and then draws the page afresh; with `confirm`,
 * console.js asks that question first and sends nothing unless the operator confirms.
 */
const changeButton = (url: string, label: string, confirm?: string, title?: string) =>
  html`<button type="button" class="secondary${confirm ? ' danger' : ''}" data-post="${url}" data-then="reload" data-confirm="${confirm ?? ''}" ${title ? html`title="${title}" aria-label="${title}"` : ''}>${label}</button>`;
