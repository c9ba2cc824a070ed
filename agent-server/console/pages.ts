import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { z } from 'zod';
import type { AuditRow as AuditRowSchema, PromptInfo as PromptSchema } from '../../mcp-gateway/contract.ts';

type AuditRow = z.infer<typeof AuditRowSchema>;
type PromptInfo = z.infer<typeof PromptSchema>;

import { EventType, type PendingApproval, type Task, type TaskStatus } from '../contract.ts';

// The console's pages as server-rendered HTML (hono/html escapes every interpolated value). No inline script
// or style: the page's behaviour is /console/assets/console.js, its look console.css (the CSP allows only
// those). Forms that change something are sent by console.js as JSON with the login's CSRF token; forms that
// only search are plain GET forms and work without it.

export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/** What every page shows around its content. */
export interface Frame {
  title: string;
  /** The nav entry to mark. */
  section: 'overview' | 'toolsets' | 'tasks' | 'approvals' | 'audit' | 'run';
  /** The login's role as the console names it; undefined on a service without tokens. */
  role: string;
  /** The login's CSRF token (absent without a login). */
  csrf?: string;
  /** The assets' version, so a new release is fetched again. */
  version: string;
  /** Whether the login may change things (run, cancel, decide; operator: toolsets). */
  can: Can;
}

/** What a login may do, by its role. */
export interface Can {
  run: boolean;
  decide: boolean;
  operate: boolean;
}

const NAV: [Frame['section'], string, string][] = [
  ['overview', 'Overview', '/console/'],
  ['toolsets', 'Toolsets', '/console/toolsets'],
  ['tasks', 'Tasks', '/console/tasks'],
  ['approvals', 'Approvals', '/console/approvals'],
  ['audit', 'Audit', '/console/audit'],
  ['run', 'Run a task', '/console/run'],
];

function head(title: string, version: string, csrf?: string) {
  return html`<meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="color-scheme" content="light dark" />
    ${csrf ? html`<meta name="csrf-token" content="${csrf}" />` : ''}
    <title>${title} · toolshift</title>
    <link rel="icon" href="/console/assets/icon.svg?v=${version}" type="image/svg+xml" />
    <link rel="stylesheet" href="/console/assets/console.css?v=${version}" />
    <script type="module" src="/console/assets/console.js?v=${version}"></script>`;
}

export function layout(frame: Frame, body: Html): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        ${head(frame.title, frame.version, frame.csrf)}
      </head>
      <body>
        <header class="top">
          <a class="brand" href="/console/">toolshift</a>
          <nav>
            ${NAV.map(
              ([id, label, href]) =>
                html`<a href="${href}" ${id === frame.section ? raw('aria-current="page"') : ''}>${label}</a>`,
            )}
          </nav>
          <div class="who">
            <span class="role" data-role="${frame.role}">${frame.role}</span>
            ${frame.csrf ? html`<button type="button" class="link" data-post="/console/logout" data-then="/console/login">Log out</button>` : ''}
          </div>
        </header>
        <main>
          <h1>${frame.title}</h1>
          <p class="flash" role="status" aria-live="polite" hidden></p>
          ${body}
        </main>
      </body>
    </html>`;
}

export function loginPage(version: string, message?: string): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        ${head('Log in', version)}
      </head>
      <body class="login">
        <main>
          <h1>toolshift console</h1>
          ${message ? html`<p class="flash error" role="alert">${message}</p>` : html`<p class="flash" role="status" hidden></p>`}
          <form data-json="/console/login" data-then="/console/" autocomplete="off">
            <label
              >Token
              <input name="token" type="password" required maxlength="512" autofocus />
            </label>
            <p class="hint">
              VIEWER_TOKEN reads, AGENT_API_TOKEN also runs tasks and decides approvals, GATEWAY_ADMIN_TOKEN does
              everything. <code>npx toolshift token admin</code> prints one; <code>npx toolshift console</code>
              prints a one-time login link instead.
            </p>
            <button type="submit">Log in</button>
          </form>
        </main>
      </body>
    </html>`;
}

const when = (iso: string | null | undefined) =>
  iso ? html`<time datetime="${iso}">${iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>` : '';

const status = (s: string) => html`<span class="status s-${s}">${s.replace('_', ' ')}</span>`;

/** A service's health as the overview shows it. */
export interface ServiceHealth {
  name: string;
  state: 'ok' | 'degraded' | 'down';
  detail: string;
}

export function overviewPage(data: {
  services: ServiceHealth[];
  counts: Partial<Record<TaskStatus, number>>;
  approvals: number;
  failures: Task[];
  upstreams: { id: string; health: string; reason?: string }[];
}): Html {
  const count = (s: TaskStatus) => data.counts[s] ?? 0;
  return html`<section class="cards">
      ${data.services.map(
        (s) => html`<div class="card svc-${s.state}">
          <h2>${s.name}</h2>
          <p class="big">${s.state}</p>
          <p class="muted">${s.detail}</p>
        </div>`,
      )}
    </section>
    <section class="cards">
      <a class="card" href="/console/tasks?status=running"><h2>Running</h2><p class="big" data-count="running">${count('running')}</p></a>
      <a class="card" href="/console/tasks?status=queued"><h2>Queued</h2><p class="big" data-count="queued">${count('queued')}</p></a>
      <a class="card" href="/console/tasks?status=awaiting_approval"><h2>Waiting for a human</h2><p class="big" data-count="awaiting_approval">${count('awaiting_approval')}</p></a>
      <a class="card" href="/console/approvals"><h2>Pending approvals</h2><p class="big" data-count="approvals">${data.approvals}</p></a>
    </section>
    <h2>Upstream MCP servers</h2>
    ${
      data.upstreams.length === 0
        ? html`<p class="muted">None configured.</p>`
        : html`<table>
            <thead><tr><th>Toolset</th><th>Health</th><th>Reason</th></tr></thead>
            <tbody>
              ${data.upstreams.map(
                (u) =>
                  html`<tr><td><a href="/console/toolsets#${u.id}">${u.id}</a></td><td>${health(u.health)}</td><td>${u.reason ?? ''}</td></tr>`,
              )}
            </tbody>
          </table>`
    }
    <h2>Recent failures</h2>
    ${
      data.failures.length === 0
        ? html`<p class="muted">No failed task.</p>`
        : html`<table>
            <thead><tr><th>Task</th><th>Goal</th><th>Reason</th><th>Finished</th></tr></thead>
            <tbody>
              ${data.failures.map(
                (t) => html`<tr>
                  <td><a href="/console/tasks/${t.task_id}">${short(t.task_id)}</a></td>
                  <td class="clip">${t.goal}</td>
                  <td class="reason">${t.error ?? ''}</td>
                  <td>${when(t.finished_at)}</td>
                </tr>`,
              )}
            </tbody>
          </table>`
    }`;
}

/** A toolset's or server's health as a tag (`native` for the tool-server's own). */
export const health = (h: string | undefined) =>
  html`<span class="health h-${h ?? 'native'}">${h ?? 'native'}</span>`;
const short = (id: string) => (id.length > 18 ? `${id.slice(0, 17)}…` : id);

export const TASK_PAGE = 50;

export function tasksPage(
  tasks: Task[],
  filter: { status?: string; goal?: string; after?: string },
  statuses: readonly string[],
): Html {
  const next = tasks.length === TASK_PAGE ? tasks[tasks.length - 1].task_id : undefined;
  const more = new URLSearchParams(
    Object.entries({ status: filter.status, goal: filter.goal, after: next }).filter(
      (e): e is [string, string] => !!e[1],
    ),
  );
  return html`<form class="filters" method="get" action="/console/tasks">
      <label
        >Status
        <select name="status">
          <option value="">any</option>
          ${statuses.map((s) => html`<option value="${s}" ${s === filter.status ? raw('selected') : ''}>${s}</option>`)}
        </select>
      </label>
      <label>Goal contains <input name="goal" value="${filter.goal ?? ''}" maxlength="200" /></label>
      <button type="submit">Filter</button>
    </form>
    ${
      tasks.length === 0
        ? html`<p class="muted">No task${filter.status || filter.goal ? ' matches' : ' yet'}.</p>`
        : html`<table>
            <thead><tr><th>Task</th><th>Status</th><th>Goal</th><th>Steps</th><th>Toolsets used</th><th>Created</th></tr></thead>
            <tbody>
              ${tasks.map(
                (t) => html`<tr>
                  <td><a href="/console/tasks/${t.task_id}">${short(t.task_id)}</a></td>
                  <td>${status(t.status)}</td>
                  <td class="clip">${t.goal}</td>
                  <td class="num">${t.steps}</td>
                  <td>${t.toolsets_used.join(', ')}</td>
                  <td>${when(t.created_at)}</td>
                </tr>`,
              )}
            </tbody>
          </table>`
    }
    ${next ? html`<p><a href="/console/tasks?${more.toString()}">Older tasks →</a></p>` : ''}`;
}

export function taskPage(task: Task, can: Can): Html {
  return html`<section
    class="task"
    data-task="${task.task_id}"
    data-can-decide="${String(can.decide)}"
    data-event-types="${EventType.options.join(' ')}"
  >
    <dl class="facts">
      <dt>Status</dt><dd data-field="status">${status(task.status)}</dd>
      <dt>Goal</dt><dd class="goal">${task.goal}</dd>
      <dt>Session</dt><dd><code>${task.session_id}</code></dd>
      <dt>Created</dt><dd>${when(task.created_at)}</dd>
    </dl>
    ${
      can.run
        ? html`<p class="actions"><button type="button" data-post="/agent/tasks/${encodeURIComponent(task.task_id)}/cancel" data-cancel>Cancel</button></p>`
        : ''
    }
    <div class="pending" data-pending hidden></div>
    <figure class="chart">
      <figcaption>Tool-definition tokens each model request carried (filled) against all toolsets at once (outline)</figcaption>
      <svg data-chart viewBox="0 0 600 120" preserveAspectRatio="xMinYMid meet" role="img" aria-label="tokens per request"></svg>
    </figure>
    <p class="muted" data-stream-state>Connecting…</p>
    <ol class="events" data-events></ol>
    <div class="result" data-result hidden></div>
  </section>`;
}

export function approvalsPage(approvals: PendingApproval[], can: Can): Html {
  return html`<p class="muted">This list follows the queue live.</p>
    <div data-approvals data-can-decide="${String(can.decide)}">
      ${approvals.length === 0 ? html`<p class="muted" data-empty>Nothing waits for a human.</p>` : ''}
      ${approvals.map((a) => approvalCard(a, can))}
    </div>`;
}

export function approvalCard(a: PendingApproval, can: Can): Html {
  return html`<article class="approval" data-approval="${a.task_id}/${a.call_id}">
    <h2>${a.kind === 'activate' ? 'Activate' : a.kind === 'call' ? 'Call' : 'Run again?'} <code>${a.subject}</code></h2>
    <p>Task <a href="/console/tasks/${a.task_id}">${short(a.task_id)}</a> · expires ${when(a.expires_at)}</p>
    <p class="reason">${a.reason}</p>
    ${a.arguments ? html`<pre class="args">${JSON.stringify(a.arguments, null, 2)}</pre>` : ''}
    ${can.decide ? decideForm(a.task_id, a.call_id) : ''}
  </article>`;
}

function decideForm(taskId: string, callId: string) {
  return html`<form class="decide" data-decide="/agent/tasks/${encodeURIComponent(taskId)}/approvals/${encodeURIComponent(callId)}">
    <input name="reason" placeholder="Reason (optional)" maxlength="500" />
    <button type="submit" name="approve" value="true">Approve</button>
    <button type="submit" name="approve" value="false" class="deny">Deny</button>
  </form>`;
}

export const AUDIT_PAGE = 100;

export function auditPage(
  rows: AuditRow[],
  nextCursor: string | null,
  query: Record<string, string>,
  kinds: readonly string[],
): Html {
  const field = (name: string, label: string, type = 'text') =>
    html`<label>${label} <input name="${name}" type="${type}" value="${query[name] ?? ''}" maxlength="200" /></label>`;
  const search = new URLSearchParams(Object.entries(query).filter(([k, v]) => v && k !== 'cursor'));
  const next = new URLSearchParams(search);
  if (nextCursor) next.set('cursor', nextCursor);
  return html`<form class="filters" method="get" action="/console/audit">
      ${field('since', 'Since')} ${field('until', 'Until')} ${field('actor', 'Actor')}
      ${field('session_id', 'Session')} ${field('task_id', 'Task')} ${field('toolset', 'Toolset')}
      ${field('tool', 'Tool')}
      <label
        >Kind
        <select name="kind">
          <option value="">any</option>
          ${kinds.map((k) => html`<option ${k === query.kind ? raw('selected') : ''}>${k}</option>`)}
        </select>
      </label>
      <label
        >Outcome
        <select name="outcome">
          <option value="">any</option>
          <option value="ok" ${query.outcome === 'ok' ? raw('selected') : ''}>ok</option>
          <option value="refused" ${query.outcome === 'refused' ? raw('selected') : ''}>refused</option>
        </select>
      </label>
      <button type="submit">Search</button>
      <a class="button" href="/console/audit/export?${search.toString()}" download="audit.jsonl">Export JSON lines</a>
    </form>
    ${
      rows.length === 0
        ? html`<p class="muted">No audit row matches.</p>`
        : html`<table class="audit">
            <thead><tr><th>When</th><th>Actor</th><th>Kind</th><th>Subject</th><th>Outcome</th><th>Session / task</th><th>Detail</th></tr></thead>
            <tbody>
              ${rows.map(
                (r) => html`<tr data-audit="${r.id}">
                  <td>${when(r.at)}</td>
                  <td>${r.actor}</td>
                  <td>${r.kind}</td>
                  <td><code>${r.subject}</code></td>
                  <td>${r.ok ? html`<span class="ok">ok</span>` : html`<span class="refused">refused</span>`}</td>
                  <td>${r.task_id ? html`<a href="/console/tasks/${r.task_id}">${short(r.task_id)}</a>` : (r.session_id ?? '')}</td>
                  <td class="clip">${r.detail ?? ''}</td>
                </tr>`,
              )}
            </tbody>
          </table>`
    }
    ${nextCursor ? html`<p><a href="/console/audit?${next.toString()}">Older rows →</a></p>` : ''}`;
}

export function runPage(prompts: PromptInfo[], can: Can): Html {
  if (!can.run) return html`<p class="muted">Running tasks needs an approver's or the operator's login.</p>`;
  return html`<form class="run" data-run>
      <h2>A goal</h2>
      <textarea name="goal" rows="4" maxlength="20000" required placeholder="What should the agent do?"></textarea>
      <button type="submit">Run</button>
    </form>
    <h2>Or a playbook</h2>
    ${
      prompts.length === 0
        ? html`<p class="muted">No playbook prompts (PROMPTS_DIR).</p>`
        : prompts.map(
            (p) => html`<form class="run playbook" data-run data-prompt="${p.name}">
              <h3>${p.name}</h3>
              <p class="muted">${p.description}</p>
              ${p.arguments.map(
                (a) => html`<label
                  >${a.name}${a.required ? ' *' : ''}
                  <input name="${a.name}" ${a.required ? raw('required') : ''} maxlength="2000" placeholder="${a.description}" />
                </label>`,
              )}
              <button type="submit">Run ${p.name}</button>
            </form>`,
          )
    }`;
}
