import { html, raw } from 'hono/html';
import type { z } from 'zod';
import type { AuditRow as AuditRowSchema } from '../../mcp-gateway/contract.ts';
import { short, when } from './format.ts';
import type { Html } from './pages.ts';

// The audit page: the gateway's audit rows searched, a page at a time, and the export link. Each row on one
// line at 1280 px: times to the second, the model's task as a short link, a reload's outcome as words.

type AuditRow = z.infer<typeof AuditRowSchema>;

export const AUDIT_PAGE = 100;

/** The model in a task, as the gateway names that actor. */
const MODEL_IN_TASK = /^model in task (\S+)$/;

function actor(r: AuditRow) {
  const task = MODEL_IN_TASK.exec(r.actor)?.[1];
  return task ? html`<span title="${r.actor}">model</span>` : r.actor;
}

/** A call refused until a human approves it is waiting, not refused: the policy asked. */
const asked = (r: AuditRow) => !r.ok && /^awaiting approval /.test(r.detail ?? '');

function outcome(r: AuditRow) {
  if (r.ok) return html`<span class="ok">ok</span>`;
  if (asked(r)) return html`<span class="asked" title="the policy asks a human first">asked a human</span>`;
  return html`<span class="refused">refused</span>`;
}

/** A detail the gateway wrote as JSON (a reload's outcome) as words: `added: bank · removed: none`. */
function detail(text: string | null | undefined): string {
  if (!text?.startsWith('{')) return text ?? '';
  try {
    const value = JSON.parse(text) as unknown;
    if (!value || typeof value !== 'object' || Array.isArray(value)) return text;
    return Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') || 'none' : String(v)}`)
      .join(' · ');
  } catch {
    return text;
  }
}

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
          <option value="refused" ${query.outcome === 'refused' ? raw('selected') : ''}>refused or asked</option>
        </select>
      </label>
      <button type="submit">Search</button>
      <a class="button secondary" href="/console/audit/export?${search.toString()}" download="audit.jsonl">Export JSON lines</a>
    </form>
    ${
      rows.length === 0
        ? html`<p class="muted">No audit row matches.</p>`
        : html`<div class="scroll"><table class="audit fit">
            <thead><tr><th>When (UTC)</th><th>Actor</th><th>Kind</th><th>Subject</th><th>Outcome</th><th class="wide">Session / task</th><th>Detail</th></tr></thead>
            <tbody>
              ${rows.map(
                (r) => html`<tr data-audit="${r.id}">
                  <td class="nowrap">${when(r.at)}</td>
                  <td class="nowrap">${actor(r)}</td>
                  <td>${r.kind}</td>
                  <td class="subject"><code>${r.subject}</code></td>
                  <td class="nowrap">${outcome(r)}</td>
                  <td class="wide nowrap">${r.task_id ? html`<a href="/console/tasks/${r.task_id}" title="${r.task_id}">${short(r.task_id)}</a>` : r.session_id ? short(r.session_id) : ''}</td>
                  <td class="clip" title="${r.detail ?? ''}">${detail(r.detail)}</td>
                </tr>`,
              )}
            </tbody>
          </table></div>`
    }
    ${nextCursor ? html`<p><a href="/console/audit?${next.toString()}">Older rows →</a></p>` : ''}`;
}
