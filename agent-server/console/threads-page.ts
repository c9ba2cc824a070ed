import { html, raw } from 'hono/html';
import { LIMITS } from '../../lib/http/limits.ts';
import { LIVE_STATUSES, type Thread, type ThreadTurn } from '../contract.ts';
import { short, status, when } from './format.ts';
import type { Can, Html } from './pages.ts';

// The console's threads: the list (the login's own, the operator's all) and one thread with its turns, the turn
// that runs followed live (console.js, thread.js) and a form to continue it.

export const THREAD_PAGE = 50;

/** A turn still to end: the page follows it live. */
const LIVE = new Set<string>(LIVE_STATUSES);

export function threadsPage(threads: Thread[]): Html {
  const next = threads.length === THREAD_PAGE ? threads[threads.length - 1].thread_id : undefined;
  return html`${
    threads.length === 0
      ? html`<p class="muted">No thread yet: every task starts one (<a href="/console/run">Run a task</a>).</p>`
      : html`<div class="scroll"><table class="fit threads">
          <thead><tr><th>Thread</th><th>Title</th><th>Last turn</th><th class="wide">Started</th></tr></thead>
          <tbody>
            ${threads.map(
              (t) => html`<tr data-thread-row="${t.thread_id}">
                <td><a href="/console/threads/${t.thread_id}">${short(t.thread_id)}</a></td>
                <td class="clip">${t.title}</td>
                <td>${when(t.updated_at)}</td>
                <td class="wide">${when(t.created_at)}</td>
              </tr>`,
            )}
          </tbody>
        </table></div>`
  }
  ${next ? html`<p><a href="/console/threads?after=${next}">Older threads →</a></p>` : ''}`;
}

function turnItem(t: ThreadTurn, i: number): Html {
  return html`<li class="turn" data-turn="${t.task_id}" ${LIVE.has(t.status) ? raw('data-live') : ''}>
    <p class="turn-goal"><span class="muted">${i + 1}.</span> ${t.goal}</p>
    <p class="turn-meta">
      <span data-turn-status>${status(t.status)}</span> ·
      <a href="/console/tasks/${t.task_id}">${short(t.task_id)}</a> · ${when(t.created_at)}
    </p>
    <blockquote class="live-answer turn-answer" data-answer aria-live="polite" ${t.final_answer ? '' : raw('hidden')}>${t.final_answer ?? ''}</blockquote>
    ${t.error ? html`<p class="reason" data-error>${t.error}</p>` : ''}
  </li>`;
}

export function threadPage(
  thread: Thread & {
    turns: ThreadTurn[];
    compaction: { summarised_messages: number; stubbed_results: number };
  },
  can: Can,
): Html {
  const { compaction } = thread;
  return html`<section class="thread" data-thread="${thread.thread_id}">
    <dl class="facts">
      <dt>Thread</dt><dd><code>${thread.thread_id}</code></dd>
      <dt>Session</dt><dd><code>${thread.session_id}</code></dd>
      <dt>Started</dt><dd>${when(thread.created_at)}</dd>
      <dt>Compacted</dt>
      <dd>${compacted(compaction)}</dd>
    </dl>
    ${
      thread.turns.length === 0
        ? html`<p class="muted" data-no-turns>No turn yet.</p>`
        : html`<ol class="turns" data-turns>${thread.turns.map(turnItem)}</ol>`
    }
    ${
      can.run
        ? html`<form class="run" data-continue="${thread.thread_id}">
            <label for="next-goal">Continue the thread</label>
            <textarea id="next-goal" name="goal" rows="3" maxlength="${LIMITS.goal}" required
              placeholder="What next? The agent sees the turns above."></textarea>
            <button type="submit">Send</button>
          </form>`
        : html`<p class="muted">Continuing a thread needs an approver's or the operator's login.</p>`
    }
  </section>`;
}

/** What compaction moved out of the model's view, in words. */
const compacted = (c: { stubbed_results: number; summarised_messages: number }) =>
  `${count(c.stubbed_results, 'result')} moved out, ${count(c.summarised_messages, 'message')} summarised`;

/** `n thing` or `n things`. */
const count = (n: number, thing: string) => `${n} ${thing}${n === 1 ? '' : 's'}`;
