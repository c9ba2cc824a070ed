// What every console script shares: elements built with DOM APIs only (no HTML strings, as the page's Trusted
// Types policy requires), JSON requests with the login's CSRF token, and the words the server-rendered pages use
// for numbers, times and who decided (agent-server/console/format.ts).

export const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';

/** An element with attributes and children (strings become text). */
export function el(tag, attrs = {}, ...children) {
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
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

export function flash(message, kind = 'info') {
  const box = document.querySelector('.flash');
  if (!box) return;
  box.textContent = message;
  box.className = `flash ${kind}`;
  box.hidden = false;
}

/** A JSON request to this origin with the CSRF token; resolves to {ok, status, data}. */
export async function send(method, url, body) {
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

export const errorOf = (answer) => answer.data?.error ?? `HTTP ${answer.status}`;

const NUMBER = new Intl.NumberFormat('en-US');
export const num = (n) => NUMBER.format(n);
export const plural = (n, one, many = `${one}s`) => `${num(n)} ${n === 1 ? one : many}`;
export const shortId = (id) => (id.length > 18 ? `${id.slice(0, 17)}…` : id);
/** A time on one line, to the second, UTC. */
export const stamp = (iso) => (iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}` : '');
const ACTORS = {
  admin: 'operator (GATEWAY_ADMIN_TOKEN)',
  'user (AGENT_API_TOKEN)': 'approver (AGENT_API_TOKEN)',
  user: 'approver (AGENT_API_TOKEN)',
  local: 'operator (no tokens set)',
};
export const who = (by) => (by ? (ACTORS[by] ?? by) : 'nobody');
/** An elapsed time as the CLI writes it: 850 ms, 3.2 s, 2 min 05 s. */
export function elapsed(ms) {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
}
/** A decision as a person reads it: the verdict, who, when, and the reason they gave. */
export function decisionText(d) {
  const verdict = d.approved ? 'Approved' : d.decided_by ? 'Denied' : 'Not approved';
  const by = d.decided_by ? ` by ${who(d.decided_by)}` : '';
  const at = d.decided_at ? ` at ${stamp(d.decided_at)}` : '';
  return `${verdict}${by}${at}`;
}

export function decideForm(taskId, callId) {
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

export const KIND_TITLE = { activate: 'Activate', call: 'Call', unknown_outcome: 'Run again?' };
