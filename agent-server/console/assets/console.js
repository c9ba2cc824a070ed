// The console's behaviour: forms and buttons sent as JSON with the login's CSRF token (a change that takes
// something away asks first), the live approval queue, and (task.js) one task followed live.

import {
  decideForm,
  decisionText,
  el,
  errorOf,
  fill,
  flash,
  KIND_TITLE,
  plural,
  send,
  shortId,
  stamp,
} from './lib.js';
import { followTask } from './task.js';

function after(then) {
  if (!then) return;
  if (then === 'reload') location.reload();
  else location.assign(then);
}

function showResult(box, text, failed) {
  box.hidden = false;
  box.textContent = text;
  box.classList.toggle('error', failed);
}

/** An answer the console shows in words: a reload's outcome, one line per kind of change. */
function answerText(data) {
  if (data && Array.isArray(data.added) && Array.isArray(data.warnings)) {
    const list = (a) => (a.length > 0 ? a.join(', ') : 'none');
    return [
      `Reloaded: ${plural(data.added.length, 'toolset')} added (${list(data.added)}), ` +
        `${data.removed.length} removed (${list(data.removed)}), ${data.changed.length} changed (${list(data.changed)}), ` +
        `${data.unchanged.length} unchanged.`,
      data.warnings.length > 0 ? `Warnings:\n${data.warnings.map((w) => `• ${w}`).join('\n')}` : 'No warnings.',
    ].join('\n');
  }
  return JSON.stringify(data, null, 2);
}

/**
 * Asks before a change that takes something away (data-confirm): a modal dialog, answered by a button, so
 * nothing is sent unless the operator confirms. Resolves true to go on.
 */
function confirmFirst(button) {
  const question = button.dataset.confirm;
  if (!question) return Promise.resolve(true);
  return new Promise((resolve) => {
    const yes = el('button', { type: 'submit', value: 'yes', class: 'danger' }, button.textContent.trim());
    const no = el('button', { type: 'submit', value: 'no', class: 'secondary', autofocus: true }, 'Cancel');
    const dialog = el(
      'dialog',
      { class: 'confirm', 'data-confirm-dialog': true },
      el('form', { method: 'dialog' }, el('p', {}, question), el('p', { class: 'actions' }, no, ' ', yes)),
    );
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'yes');
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/**
 * A new key, shown once: its secret is in the answer of the request that made it and nowhere else (never in
 * storage, never in the page the server draws), so it is gone with this page.
 */
function showKey(box, made) {
  const secret = el('code', { class: 'secret', 'data-secret': true }, made.key);
  const copy = el('button', { type: 'button', class: 'secondary' }, 'Copy');
  copy.addEventListener('click', () => {
    getSelection()?.selectAllChildren(secret);
    navigator.clipboard
      ?.writeText(made.key)
      .then(() => {
        copy.textContent = 'Copied';
      })
      .catch(() => flash('The browser did not let the page copy: the key is selected, copy it yourself.', 'warn'));
  });
  const expires = made.expires_at ? `expires ${stamp(made.expires_at)}` : 'never expires';
  fill(
    box,
    el('p', {}, el('strong', {}, `New ${made.role} key for ${made.user}`), ` (${made.id}, ${expires}):`),
    el('p', { class: 'secret-line' }, secret, ' ', copy),
    el(
      'p',
      { class: 'hint' },
      'Copy it now and give it to them: it is shown this once, never again (only its hash is kept). ',
      el('a', { href: location.pathname }, 'Reload'),
      ' to see it in the list.',
    ),
  );
  box.hidden = false;
}

// A result kept across the page's reload (see below), shown once: taken from storage on the next page whether
// or not that page has a place for it.
function takeKept(name) {
  try {
    const key = `result:${name}`;
    const kept = sessionStorage.getItem(key);
    sessionStorage.removeItem(key);
    return kept;
  } catch {
    return null;
  }
}
for (const name of ['reload']) {
  const kept = takeKept(name);
  const box = document.querySelector(`[data-result="${name}"]`);
  if (kept !== null && box) showResult(box, kept, false);
}

// Buttons that post: data-post (URL), data-body (JSON), data-then (reload or a path), data-show (a result box).
document.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-post]');
  if (!button) return;
  event.preventDefault();
  if (!(await confirmFirst(button))) return;
  button.disabled = true;
  const body = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
  const answer = await send('POST', button.dataset.post, body);
  button.disabled = false;
  const box = button.dataset.show && document.querySelector(`[data-result="${button.dataset.show}"]`);
  if (box) {
    showResult(box, answer.ok ? answerText(answer.data) : errorOf(answer), !answer.ok);
    // The page is drawn afresh after a change; the answer is shown again there (if this tab keeps storage).
    if (answer.ok && button.dataset.then === 'reload') {
      try {
        sessionStorage.setItem(`result:${button.dataset.show}`, box.textContent);
      } catch {}
    }
  }
  if (!answer.ok) return flash(errorOf(answer), 'error');
  if ('cancel' in button.dataset) flash('Cancelled.');
  after(button.dataset.then);
});

document.addEventListener('submit', async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  if (form.dataset.json) {
    event.preventDefault();
    // A field left empty is one not given (an optional email, label or expiry).
    const fields = Object.fromEntries([...new FormData(form)].filter(([, v]) => v !== ''));
    const answer = await send('POST', form.dataset.json, fields);
    if (!answer.ok) return flash(errorOf(answer), 'error');
    const box = form.dataset.show && document.querySelector(`[data-result="${form.dataset.show}"]`);
    if (box && answer.data?.key) {
      form.reset();
      showKey(box, answer.data);
      flash(`Key ${answer.data.id} made for ${answer.data.user}.`);
    }
    after(form.dataset.then);
  } else if (form.dataset.decide) {
    event.preventDefault();
    await decide(form, event.submitter);
  } else if ('run' in form.dataset) {
    event.preventDefault();
    const fields = Object.fromEntries(new FormData(form));
    const body = form.dataset.prompt
      ? {
          prompt: {
            name: form.dataset.prompt,
            arguments: Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== '')),
          },
          wait: false,
        }
      : { goal: fields.goal, wait: false };
    const answer = await send('POST', '/agent/execute_task', body);
    if (!answer.ok) return flash(errorOf(answer), 'error');
    location.assign(`/console/tasks/${answer.data.task_id}`);
  }
});

async function decide(form, submitter) {
  const approve = submitter?.value === 'true';
  const reason = new FormData(form).get('reason');
  for (const b of form.querySelectorAll('button')) b.disabled = true;
  const answer = await send('POST', form.dataset.decide, {
    approve,
    ...(reason ? { reason: String(reason) } : {}),
  });
  if (!answer.ok) {
    for (const b of form.querySelectorAll('button')) b.disabled = false;
    return flash(
      answer.status === 409 ? `Too late: ${errorOf(answer)}` : errorOf(answer),
      answer.status === 409 ? 'warn' : 'error',
    );
  }
  flash(`${approve ? 'Approved' : 'Denied'}: the task goes on.`);
  // The card keeps what was asked; the form gives way to the decision, with who made it, when and why.
  const d = { ...answer.data, approved: approve };
  form.replaceWith(
    el(
      'p',
      { class: `decided ${approve ? 'ok' : 'refused'}`, 'data-decided': approve ? 'approved' : 'denied' },
      decisionText(d),
      d.reason ? el('span', { class: 'why' }, ` — “${d.reason}”`) : null,
    ),
  );
}

function approvalCard(a, canDecide) {
  return el(
    'article',
    { class: 'approval', 'data-approval': `${a.task_id}/${a.call_id}` },
    el('h2', {}, `${KIND_TITLE[a.kind] ?? a.kind} `, el('code', {}, a.subject)),
    el(
      'p',
      {},
      'Task ',
      el('a', { href: `/console/tasks/${a.task_id}` }, shortId(a.task_id)),
      ' · expires ',
      el('time', { datetime: a.expires_at, title: a.expires_at }, stamp(a.expires_at)),
    ),
    el('p', { class: 'reason' }, a.reason),
    a.arguments ? el('pre', { class: 'args' }, JSON.stringify(a.arguments, null, 2)) : null,
    canDecide ? decideForm(a.task_id, a.call_id) : null,
  );
}

// The approval queue, followed live: new requests appear, decided ones go (a reason being typed stays).
const queue = document.querySelector('[data-approvals]');
if (queue) {
  const canDecide = queue.dataset.canDecide === 'true';
  const refresh = async () => {
    const res = await fetch('/agent/approvals', { credentials: 'same-origin' }).catch(() => undefined);
    if (!res?.ok) return;
    const { approvals } = await res.json();
    const keys = new Set(approvals.map((a) => `${a.task_id}/${a.call_id}`));
    for (const card of queue.querySelectorAll('[data-approval]')) {
      if (!keys.has(card.dataset.approval) && !card.querySelector('.decided')) card.remove();
    }
    for (const a of approvals) {
      const key = `${a.task_id}/${a.call_id}`;
      if (![...queue.querySelectorAll('[data-approval]')].some((c) => c.dataset.approval === key))
        queue.append(approvalCard(a, canDecide));
    }
    const empty = queue.querySelector('[data-empty]');
    if (approvals.length > 0) empty?.remove();
    else if (!empty && !queue.querySelector('[data-approval]'))
      queue.append(el('p', { class: 'muted', 'data-empty': true }, 'Nothing waits for a human.'));
  };
  setInterval(refresh, 2000);
}

// One task, live.
const taskView = document.querySelector('[data-task]');
if (taskView) followTask(taskView);

// A thread's page (thread.js, loaded there alone, so no other page waits for it).
const threadView = document.querySelector('[data-thread]');
if (threadView) {
  import('./thread.js')
    .then((thread) => thread.showThread(threadView))
    .catch((err) => flash(`The page's script did not load: ${err.message}`, 'error'));
}
