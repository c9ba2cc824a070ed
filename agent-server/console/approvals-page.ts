import { html } from 'hono/html';
import type { Approval } from '../../mcp-gateway/contract.ts';
import type { PendingApproval } from '../contract.ts';
import { short, when, who } from './format.ts';
import type { Can, Html } from './pages.ts';

// The approvals page: what waits for a human now (followed live by console.js), and the decisions made, with
// who made each, when, and why.

const TITLE: Record<string, string> = { activate: 'Activate', call: 'Call', unknown_outcome: 'Run again?' };

/** The pending requests, then the history of decisions (`decided` null: the gateway did not answer, `error`). */
export function approvalsPage(
  approvals: PendingApproval[],
  can: Can,
  decided: { approvals: Approval[] } | { error: string },
): Html {
  return html`<p class="muted">This list follows the queue live.</p>
    <div data-approvals data-can-decide="${String(can.decide)}">
      ${approvals.length === 0 ? html`<p class="muted" data-empty>Nothing waits for a human.</p>` : ''}
      ${approvals.map((a) => approvalCard(a, can))}
    </div>
    <h2 id="decided">Decided</h2>
    ${'error' in decided ? html`<p class="flash error" role="alert">The gateway did not answer: ${decided.error}</p>` : history(decided.approvals)}`;
}

export function approvalCard(a: PendingApproval, can: Can): Html {
  return html`<article class="approval" data-approval="${a.task_id}/${a.call_id}">
    <h2>${TITLE[a.kind] ?? a.kind} <code>${a.subject}</code></h2>
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

/** What became of a request: `used` was approved (and then spent by the call it allowed). */
const OUTCOME: Record<string, [string, string]> = {
  approved: ['approved', 'ok'],
  used: ['approved', 'ok'],
  denied: ['denied', 'refused'],
  expired: ['expired', 'asked'],
};

/** The decisions, newest first: what was asked, the decision, who made it, when, and the reason they gave. */
function history(all: Approval[]): Html {
  const rows = all.filter((a) => a.status !== 'pending');
  if (rows.length === 0) return html`<p class="muted">No decision yet.</p>`;
  return html`<div class="scroll"><table class="fit history">
    <thead><tr><th>Decided</th><th>Request</th><th>Decision</th><th>By</th><th>Reason</th></tr></thead>
    <tbody>
      ${rows.map((a) => {
        const [word, tone] = OUTCOME[a.status] ?? [a.status, ''];
        return html`<tr data-decided="${a.id}">
          <td>${when(a.decided_at)}</td>
          <td>
            ${TITLE[a.kind] ?? a.kind} <code>${a.subject}</code>
            ${a.task_id ? html`<div class="muted nowrap">task <a href="/console/tasks/${a.task_id}">${short(a.task_id)}</a></div>` : ''}
          </td>
          <td><span class="${tone}">${word}</span></td>
          <td class="nowrap">${a.status === 'expired' ? html`<span class="muted">nobody, in time</span>` : who(a.decided_by)}</td>
          <td class="clip" title="${a.decision_reason ?? ''}">${a.decision_reason ?? ''}</td>
        </tr>`;
      })}
    </tbody>
  </table></div>`;
}
