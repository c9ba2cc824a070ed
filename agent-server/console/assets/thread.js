// A thread's page: a turn that has not ended followed live (its reply as it streams, then its answer and how it
// ended), and the form that continues the thread with a new turn.

import { el, errorOf, fill, flash, send } from './lib.js';
import { liveAnswer } from './task.js';

/** A thread's page: its turns that have not ended followed live, and its form sending the next. */
export function showThread(view) {
  const form = view.querySelector('form[data-continue]');
  form?.addEventListener('submit', (event) => {
    event.preventDefault();
    continueThread(form).catch((err) => flash(`Not sent: ${err.message}`, 'error'));
  });
  followTurns();
}

/**
 * Follows the thread's first turn that has not ended, then the next: one event stream at a time, however many
 * turns wait (a browser keeps few connections to one origin).
 */
function followTurns() {
  const turn = document.querySelector('[data-turn][data-live]');
  if (turn) followTurn(turn, followTurns);
}

/** Follows the turn `turn` (an element with data-turn, its task's id) to its result, then calls `then`. */
function followTurn(turn, then) {
  const id = turn.dataset.turn;
  const box = turn.querySelector('[data-answer]');
  const live = liveAnswer(box);
  const source = new EventSource(`/agent/tasks/${encodeURIComponent(id)}/events`);
  // Followed from now on: the reply's text, never stored, shows only from here.
  source.onopen = () => {
    turn.dataset.following = '';
  };
  source.addEventListener('model_delta', (message) => live.delta(JSON.parse(message.data).data));
  // The recorded events that end or drop the streamed text; the rest are the task page's business.
  for (const type of ['model_call', 'model_retry', 'task_finished']) {
    source.addEventListener(type, (message) => live.event(JSON.parse(message.data)));
  }
  source.addEventListener('result', (message) => {
    source.close();
    const r = JSON.parse(message.data);
    fill(turn.querySelector('[data-turn-status]'), el('span', { class: `status s-${r.status}` }, r.status.replace('_', ' ')));
    box.textContent = r.final_answer ?? '';
    box.hidden = !r.final_answer;
    if (r.error && !turn.querySelector('[data-error]')) turn.append(el('p', { class: 'reason', 'data-error': true }, r.error));
    delete turn.dataset.live;
    delete turn.dataset.following;
    turn.dataset.ended = r.status;
    then();
  });
}

/** Sends the form's goal as the thread's next turn; the page, drawn again, follows it. */
async function continueThread(form) {
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  const goal = String(new FormData(form).get('goal') ?? '');
  const answer = await send('POST', '/agent/execute_task', { goal, thread_id: form.dataset.continue, wait: false });
  button.disabled = false;
  if (!answer.ok) return flash(errorOf(answer), 'error');
  location.reload();
}
