import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { z } from 'zod';
import type { PromptInfo as PromptSchema } from '../../mcp-gateway/contract.ts';

type PromptInfo = z.infer<typeof PromptSchema>;

import { EventType, type Task, type TaskStatus } from '../contract.ts';
import { health, num, short, status, when } from './format.ts';

// The console's pages as server-rendered HTML (hono/html escapes every interpolated value). No inline script
// or style: the page's behaviour is /console/assets/console.js, its look console.css (the CSP allows only
// those). Forms that change something are sent by console.js as JSON with the login's CSRF token; forms that
// only search are plain GET forms and work without it.

export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/** What every page shows around its content. */
export interface Frame {
  title: string;
  /** The nav entry to mark. */
  section: 'overview' | 'toolsets' | 'tasks' | 'threads' | 'approvals' | 'audit' | 'people' | 'run';
  /** The login's role as the console names it; undefined on a service without tokens. */
  role: string;
  /** The user logged in (with their key, or signed in with the identity provider); absent for a token's login. */
  user?: string;
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
  ['threads', 'Threads', '/console/threads'],
  ['approvals', 'Approvals', '/console/approvals'],
  ['audit', 'Audit', '/console/audit'],
  ['people', 'People', '/console/people'],
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
            ${NAV.filter(([id]) => id !== 'people' || frame.can.operate).map(
              ([id, label, href]) =>
                html`<a href="${href}" ${id === frame.section ? raw('aria-current="page"') : ''}>${label}</a>`,
            )}
          </nav>
          <div class="who">
            ${frame.user ? html`<span class="user" data-user="${frame.user}">${frame.user}</span>` : ''}
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

export function loginPage(version: string, message?: Html | string, opts: { signIn?: string } = {}): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        ${head('Log in', version)}
      </head>
      <body class="login">
        <main>
          <h1>toolshift console</h1>
          ${message ? html`<p class="flash error" role="alert">${message}</p>` : html`<p class="flash" role="status" hidden></p>`}
          ${
            opts.signIn
              ? html`<p><a class="button sign-in" href="/console/oidc/start">Sign in with ${opts.signIn}</a></p>
                  <p class="hint">Or, for the operator, log in with a token:</p>`
              : ''
          }
          <form data-json="/console/login" data-then="/console/" autocomplete="off">
            <label
              >Token
              <input name="token" type="password" required maxlength="512" ${opts.signIn ? '' : 'autofocus'} />
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

/** A service's health as the overview shows it. */
export interface ServiceHealth {
  name: string;
  state: 'ok' | 'degraded' | 'down';
  detail: string;
}

export function overviewPage(data: {
  services: ServiceHealth[];
  counts: Partial<Record<TaskStatus, number>>;
  /** Absent when the database did not answer (`unavailable` says why). */
  approvals?: number;
  failures: Task[];
  upstreams: { id: string; health: string; reason?: string }[];
  unavailable?: string;
}): Html {
  const count = (s: TaskStatus) => (data.unavailable ? '–' : (data.counts[s] ?? 0));
  return html`<section class="cards">
      ${data.services.map(
        (s) => html`<div class="card svc-${s.state}">
          <h2>${s.name}</h2>
          <p class="big">${s.state}</p>
          <p class="muted">${s.detail}</p>
        </div>`,
      )}
    </section>
    ${data.unavailable ? html`<p class="flash error" role="alert">Task figures unavailable: ${data.unavailable}</p>` : ''}
    <section class="cards">
      <a class="card" href="/console/tasks?status=running"><h2>Running</h2><p class="big" data-count="running">${count('running')}</p></a>
      <a class="card" href="/console/tasks?status=queued"><h2>Queued</h2><p class="big" data-count="queued">${count('queued')}</p></a>
      <a class="card" href="/console/tasks?status=awaiting_approval"><h2>Waiting for a human</h2><p class="big" data-count="awaiting_approval">${count('awaiting_approval')}</p></a>
      <a class="card" href="/console/tasks?status=awaiting_consent"><h2>Waiting for a person to connect</h2><p class="big" data-count="awaiting_consent">${count('awaiting_consent')}</p></a>
      <a class="card" href="/console/approvals"><h2>Pending approvals</h2><p class="big" data-count="approvals">${data.approvals ?? '–'}</p></a>
    </section>
    <h2>Upstream MCP servers</h2>
    ${
      data.upstreams.length === 0
        ? html`<p class="muted">None configured.</p>`
        : html`<div class="scroll"><table>
            <thead><tr><th>Toolset</th><th>Health</th><th>Reason</th></tr></thead>
            <tbody>
              ${data.upstreams.map(
                (u) =>
                  html`<tr><td><a href="/console/toolsets#${u.id}">${u.id}</a></td><td>${health(u.health)}</td><td>${u.reason ?? ''}</td></tr>`,
              )}
            </tbody>
          </table></div>`
    }
    <h2>Recent failures</h2>
    ${
      data.failures.length === 0
        ? html`<p class="muted">No failed task.</p>`
        : html`<div class="scroll"><table class="fit">
            <thead><tr><th>Task</th><th>Goal</th><th>Reason</th><th class="wide">Finished</th></tr></thead>
            <tbody>
              ${data.failures.map(
                (t) => html`<tr>
                  <td><a href="/console/tasks/${t.task_id}">${short(t.task_id)}</a></td>
                  <td class="clip">${t.goal}</td>
                  <td class="reason">${t.error ?? ''}</td>
                  <td class="wide">${when(t.finished_at)}</td>
                </tr>`,
              )}
            </tbody>
          </table></div>`
    }`;
}

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
        : html`<div class="scroll"><table class="fit tasks">
            <thead><tr><th>Task</th><th>Status</th><th>Goal</th><th class="wide">Steps</th><th class="wide">Toolsets used</th><th class="wide">Created</th></tr></thead>
            <tbody>
              ${tasks.map(
                (t) => html`<tr>
                  <td><a href="/console/tasks/${t.task_id}">${short(t.task_id)}</a></td>
                  <td>${status(t.status)}</td>
                  <td class="clip">${t.goal}</td>
                  <td class="num wide">${num(t.steps)}</td>
                  <td class="wide">${t.toolsets_used.join(', ')}</td>
                  <td class="wide">${when(t.created_at)}</td>
                </tr>`,
              )}
            </tbody>
          </table></div>`
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
    <blockquote class="live-answer" data-live-answer aria-live="polite" hidden></blockquote>
    <p class="activity" data-activity role="status" hidden>
      <span class="spinner" aria-hidden="true"></span> <span data-activity-label></span>
      <span class="elapsed" data-elapsed></span>
    </p>
    <div class="result" data-result hidden></div>
  </section>`;
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
