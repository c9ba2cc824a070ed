// The console's behaviour: JSON requests with the login's CSRF token, a task's live events (Server-Sent
// Events, resumed by the browser with Last-Event-ID after a dropped connection), the token chart, and the
// live approval queue. DOM APIs only (no HTML strings), as the page's Trusted Types policy requires.

const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';

/** An element with attributes and children (strings become text). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** Replaces a node's children, skipping the absent ones (replaceChildren would print "null"). */
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function flash(message, kind = 'info') {
  const box = document.querySelector('.flash');
  if (!box) return;
  box.textContent = message;
  box.className = `flash ${kind}`;
  box.hidden = false;
}

/** A JSON request to this origin with the CSRF token; resolves to {ok, status, data}. */
async function send(method, url, body) {
  const headers = { 'x-csrf-token': csrf };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch (err) {
    return { ok: false, status: 0, data: { error: `The console cannot be reached: ${err.message}` } };
  }
  let data = {};
  try {
    data = await res.json();
  } catch {}
  return { ok: res.ok, status: res.status, data };
}

const errorOf = (answer) => answer.data?.error ?? `HTTP ${answer.status}`;

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
  button.disabled = true;
  const body = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
  const answer = await send('POST', button.dataset.post, body);
  button.disabled = false;
  const box = button.dataset.show && document.querySelector(`[data-result="${button.dataset.show}"]`);
  if (box) {
    showResult(box, answer.ok ? JSON.stringify(answer.data, null, 2) : errorOf(answer), !answer.ok);
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
    const answer = await send('POST', form.dataset.json, Object.fromEntries(new FormData(form)));
    if (!answer.ok) return flash(errorOf(answer), 'error');
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
  const card = form.closest('[data-approval], [data-pending]');
  if (card) fill(card, el('p', { class: 'decided' }, approve ? 'Approved.' : 'Denied.'));
}

function decideForm(taskId, callId) {
  return el(
    'form',
    // Encoded: a call id is the model's text, and `../` in it must not aim the click at another route.
    {
      class: 'decide',
      'data-decide': `/agent/tasks/${encodeURIComponent(taskId)}/approvals/${encodeURIComponent(callId)}`,
    },
    el('input', { name: 'reason', placeholder: 'Reason (optional)', maxlength: 500 }),
    el('button', { type: 'submit', name: 'approve', value: 'true' }, 'Approve'),
    el('button', { type: 'submit', name: 'approve', value: 'false', class: 'deny' }, 'Deny'),
  );
}

const KIND_TITLE = { activate: 'Activate', call: 'Call', unknown_outcome: 'Run again?' };

function approvalCard(a, canDecide) {
  return el(
    'article',
    { class: 'approval', 'data-approval': `${a.task_id}/${a.call_id}` },
    el('h2', {}, `${KIND_TITLE[a.kind] ?? a.kind} `, el('code', {}, a.subject)),
    el(
      'p',
      {},
      'Task ',
      el('a', { href: `/console/tasks/${a.task_id}` }, a.task_id),
      ` · expires ${a.expires_at}`,
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

function clip(text, max = 4000) {
  const s = typeof text === 'string' ? text : JSON.stringify(text, null, 2);
  return s.length > max ? `${s.slice(0, max)}… (${s.length - max} more characters)` : s;
}

/** What one event shows: a title and its details. */
function describe(e) {
  const d = e.data;
  switch (e.type) {
    case 'task_started':
      return ['Task started', [`model ${d.model ?? 'scripted'}, up to ${d.max_steps} steps`]];
    case 'model_request':
      return [
        `Model request, step ${d.step}`,
        [
          `${d.messages} messages; tool definitions ${d.tool_tokens} tokens (all toolsets: ${d.all_toolsets_tool_tokens})`,
        ],
      ];
    case 'model_retry':
      return [`Model retry ${d.attempt}`, [d.reason]];
    case 'model_call':
      return [
        `Model answered, step ${d.step}`,
        [
          d.content ? el('blockquote', {}, clip(d.content)) : null,
          d.tool_calls.length > 0 ? `calls: ${d.tool_calls.map((c) => c.name).join(', ')}` : null,
          `${Math.round(d.latency_ms)} ms`,
        ],
      ];
    case 'tool_call_started':
      return [`Calling ${d.name}`, []];
    case 'tool_call':
      return [
        `${d.ok ? 'Tool call' : 'Tool call failed'}: ${d.name}${d.toolset ? ` (${d.toolset})` : ''}`,
        [
          el('pre', { class: 'args' }, clip(d.arguments ?? {}, 2000)),
          el('pre', { class: d.ok ? 'output' : 'output error' }, clip(d.output)),
        ],
      ];
    case 'toolset_change':
      return [
        `${d.action === 'ACTIVATE' ? 'Activated' : 'Deactivated'} ${d.toolset_ids.join(', ')}`,
        [
          `active now: ${d.active_toolsets.join(', ') || 'none'}`,
          d.added_tools.length > 0 ? `+ ${d.added_tools.join(', ')}` : null,
          d.removed_tools.length > 0 ? `− ${d.removed_tools.join(', ')}` : null,
        ],
      ];
    case 'approval_needed':
      return [`Waiting for a human: ${KIND_TITLE[d.kind] ?? d.kind} ${d.subject}`, [d.reason]];
    case 'approval_decided':
      return [`${d.approved ? 'Approved' : 'Denied'}`, [d.message ?? null]];
    case 'task_resumed':
      return [`Resumed on ${d.worker}`, [`from step ${d.step}, ${d.calls_done} calls done`]];
    case 'task_finished':
      return [`Finished: ${d.status}`, [d.error ?? null]];
    default:
      return [e.type, []];
  }
}

const SVG = 'http://www.w3.org/2000/svg';

/** Bars of each request's tool-definition tokens against all toolsets' (a dashed outline), with the scale. */
function drawChart(svg, points) {
  const max = Math.max(1, ...points.map((p) => Math.max(p.used, p.all)));
  const height = 120;
  const top = 18;
  const step = 34;
  const rect = (x, value, cls) => {
    const node = document.createElementNS(SVG, 'rect');
    const h = (value / max) * (height - top);
    node.setAttribute('x', x);
    node.setAttribute('y', height - h);
    node.setAttribute('width', step - 10);
    node.setAttribute('height', Math.max(h, 1));
    node.setAttribute('class', cls);
    return node;
  };
  const nodes = points.flatMap((p, i) => {
    const x = 60 + i * step;
    const used = rect(x, p.used, 'used');
    const title = document.createElementNS(SVG, 'title');
    title.textContent = `request ${i + 1}: ${p.used} of ${p.all} tokens`;
    used.append(title);
    return [rect(x, p.all, 'all'), used];
  });
  const scale = document.createElementNS(SVG, 'text');
  scale.setAttribute('x', 0);
  scale.setAttribute('y', 12);
  scale.textContent = `${max} tokens`;
  const base = document.createElementNS(SVG, 'text');
  base.setAttribute('x', 0);
  base.setAttribute('y', height);
  base.textContent = '0';
  svg.replaceChildren(scale, base, ...nodes);
  svg.setAttribute('viewBox', `0 0 ${Math.max(600, 70 + points.length * step)} ${height}`);
  svg.dataset.points = String(points.length);
}

function followTask(view) {
  const id = view.dataset.task;
  const canDecide = view.dataset.canDecide === 'true';
  const list = view.querySelector('[data-events]');
  const state = view.querySelector('[data-stream-state]');
  const pending = view.querySelector('[data-pending]');
  const chart = view.querySelector('[data-chart]');
  const statusField = view.querySelector('[data-field="status"]');
  const points = [];
  let last = 0;
  const setStatus = (s) => {
    fill(statusField, el('span', { class: `status s-${s}` }, s.replace('_', ' ')));
  };
  const source = new EventSource(`/agent/tasks/${encodeURIComponent(id)}/events`);
  source.onopen = () => {
    state.textContent = 'Live.';
    state.dataset.state = 'live';
  };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) return;
    state.textContent = 'Connection lost: reconnecting…';
    state.dataset.state = 'reconnecting';
  };
  const onEvent = (message) => {
    const e = JSON.parse(message.data);
    if (e.seq <= last) return; // already shown (a resumed stream starts after the last id it was given)
    last = e.seq;
    const [title, details] = describe(e);
    list.append(
      el(
        'li',
        { class: `ev ev-${e.type}`, 'data-seq': e.seq, 'data-type': e.type },
        el('span', { class: 'seq' }, `#${e.seq}`),
        el('strong', {}, title),
        details.filter((x) => x !== null).map((x) => (x instanceof Node ? x : el('div', {}, x))),
      ),
    );
    if (e.type === 'model_request') {
      points.push({ used: e.data.tool_tokens, all: e.data.all_toolsets_tool_tokens });
      drawChart(chart, points);
    }
    if (e.type === 'approval_needed') {
      setStatus('awaiting_approval');
      pending.hidden = false;
      fill(
        pending,
        el('h2', {}, `Waiting for you: ${KIND_TITLE[e.data.kind] ?? e.data.kind} `, el('code', {}, e.data.subject)),
        el('p', { class: 'reason' }, e.data.reason),
        e.data.arguments ? el('pre', { class: 'args' }, JSON.stringify(e.data.arguments, null, 2)) : null,
        canDecide ? decideForm(id, e.data.call_id) : el('p', { class: 'muted' }, 'An approver decides.'),
      );
    }
    if (e.type === 'approval_decided' || e.type === 'task_resumed') {
      pending.hidden = true;
      pending.replaceChildren();
      setStatus('running');
    }
  };
  // The event names, from the contract (the page lists them).
  for (const type of view.dataset.eventTypes.split(' ')) source.addEventListener(type, onEvent);
  source.addEventListener('result', (message) => {
    source.close();
    const r = JSON.parse(message.data);
    setStatus(r.status);
    state.textContent = 'Finished.';
    state.dataset.state = 'finished';
    pending.hidden = true;
    const box = view.querySelector('[data-result]');
    box.hidden = false;
    fill(
      box,
      el('h2', {}, `Result: ${r.status}`),
      r.final_answer ? el('blockquote', {}, r.final_answer) : null,
      r.error ? el('p', { class: 'reason' }, r.error) : null,
      el('p', { class: 'muted' }, `${r.steps} steps; toolsets used: ${r.toolsets_used.join(', ') || 'none'}`),
    );
    for (const b of view.querySelectorAll('[data-cancel]')) b.remove();
  });
}
