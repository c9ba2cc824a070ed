// One task, live: its events as they are recorded (Server-Sent Events, resumed by the browser with Last-Event-ID
// after a dropped connection), the model's reply as it streams, what it is doing now with the time it has taken,
// the token chart, a pending approval, and the result with the CLI summary's figures.

import { decideForm, decisionText, el, elapsed, fill, KIND_TITLE, num, plural } from './lib.js';

function clip(text, max = 4000) {
  const s = typeof text === 'string' ? text : JSON.stringify(text, null, 2);
  return s.length > max ? `${s.slice(0, max)}… (${s.length - max} more characters)` : s;
}

/** The page where a person connects their account, as a link (an http or https address only). */
function connectLink(url) {
  return typeof url === 'string' && /^https?:\/\//.test(url) ? el('a', { href: url }, url) : null;
}

/** What one event shows: a title and its details. */
export function describe(e) {
  const d = e.data;
  switch (e.type) {
    case 'task_started':
      return ['Task started', [`model ${d.model ?? 'scripted'}, up to ${d.max_steps} steps`]];
    case 'model_request':
      return [
        `Model request, step ${d.step}`,
        [
          `${plural(d.messages, 'message')}; tool definitions ${num(d.tool_tokens)} tokens (all toolsets: ${num(d.all_toolsets_tool_tokens)})`,
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
          elapsed(d.latency_ms),
        ],
      ];
    case 'tool_call_started':
      // A run_code call shows its script; a call the script made says so.
      return [
        `${d.in_script ? '↳ script calls' : 'Calling'} ${d.name}`,
        typeof d.script === 'string' ? [el('pre', { class: 'script' }, clip(d.script))] : [],
      ];
    case 'tool_call':
      return [
        `${d.in_script ? '↳ ' : ''}${d.ok ? 'Tool call' : 'Tool call failed'}: ${d.name}${d.toolset ? ` (${d.toolset})` : ''}`,
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
    case 'consent_required':
      return [`Waiting for the owner to connect their own account for ${d.toolset}`, [connectLink(d.connect_url)]];
    case 'approval_decided':
      return [
        decisionText(d),
        [
          d.reason ? el('blockquote', { class: 'why' }, d.reason) : null,
          // What the model is told, when it is not just the reason again.
          d.message && !(d.reason && d.message.endsWith(d.reason)) ? d.message : null,
        ],
      ];
    case 'task_resumed':
      return [
        `Resumed on ${d.worker}`,
        [
          d.step === null || d.step === undefined
            ? 'from the start: no reply of the model was checkpointed yet'
            : `from step ${d.step}, ${plural(d.calls_done, 'call')} of that reply done`,
          d.unknown
            ? `${d.unknown} started and never ended: ${d.rerun ? 'run again (it says it is safe to)' : 'a human decides'}`
            : null,
        ],
      ];
    case 'context_compacted':
      return [
        `Context compacted: ${plural(d.stubbed, 'result')} moved out, ` +
          `${plural(d.summarised_messages, 'message')} summarised, ` +
          `tokens ${num(d.tokens_before)} → ${num(d.tokens_after)}`,
        [],
      ];
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
    title.textContent = `request ${i + 1}: ${num(p.used)} of ${num(p.all)} tokens`;
    used.append(title);
    return [rect(x, p.all, 'all'), used];
  });
  const scale = document.createElementNS(SVG, 'text');
  scale.setAttribute('x', 0);
  scale.setAttribute('y', 12);
  scale.textContent = `${num(max)} tokens`;
  const base = document.createElementNS(SVG, 'text');
  base.setAttribute('x', 0);
  base.setAttribute('y', height);
  base.textContent = '0';
  svg.replaceChildren(scale, base, ...nodes);
  svg.setAttribute('viewBox', `0 0 ${Math.max(600, 70 + points.length * step)} ${height}`);
  svg.dataset.points = String(points.length);
}

/**
 * The model's reply as it streams (`model_delta`, never stored): text nodes only, never markup. A later attempt's
 * text replaces an earlier one's (it failed); the step's recorded answer (`model_call`) replaces it all.
 */
export function liveAnswer(box) {
  let shown = null; // {step, attempt} of the text in the box
  let answered = 0; // the last step whose model_call is shown
  const clear = () => {
    shown = null;
    box.replaceChildren();
    box.hidden = true;
  };
  return {
    delta({ step, attempt, text }) {
      if (step <= answered || (shown && (step < shown.step || (step === shown.step && attempt < shown.attempt)))) return;
      if (!shown || step !== shown.step || attempt !== shown.attempt) {
        box.replaceChildren();
        shown = { step, attempt };
      }
      box.append(text);
      box.hidden = false;
    },
    /** A recorded event: an answer ends its step's text, a retry or the end drops it. */
    event(e) {
      if (e.type === 'model_call') answered = Math.max(answered, e.data.step);
      if (['model_call', 'model_retry', 'task_finished'].includes(e.type)) clear();
    },
  };
}

export function followTask(view) {
  const id = view.dataset.task;
  const canDecide = view.dataset.canDecide === 'true';
  const list = view.querySelector('[data-events]');
  const state = view.querySelector('[data-stream-state]');
  const pending = view.querySelector('[data-pending]');
  const chart = view.querySelector('[data-chart]');
  const statusField = view.querySelector('[data-field="status"]');
  const activity = view.querySelector('[data-activity]');
  const live = liveAnswer(view.querySelector('[data-live-answer]'));
  const points = [];
  let last = 0;
  // What the task is doing now (the model thinking, a tool running), with the time since it began, as the
  // CLI's spinner shows it; hidden while nothing runs (waiting for a human, ended).
  let doing = null;
  let ticker;
  const tick = () => {
    if (!doing) return;
    activity.querySelector('[data-elapsed]').textContent = elapsed(Date.now() - doing.since);
  };
  const setActivity = (label, at) => {
    clearInterval(ticker);
    if (!label) {
      doing = null;
      activity.hidden = true;
      return;
    }
    // From the event's time, so a page opened mid-step counts from when it began (never from the future).
    const since = Math.min(Date.now(), Date.parse(at) || Date.now());
    doing = { since };
    activity.querySelector('[data-activity-label]').textContent = label;
    activity.hidden = false;
    tick();
    ticker = setInterval(tick, 200);
  };
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
    live.event(e);
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
    if (e.type === 'model_request') setActivity(`The model is thinking (step ${e.data.step})…`, e.at);
    else if (e.type === 'model_retry')
      setActivity(`The model is asked again (attempt ${e.data.attempt}: ${e.data.reason})…`, e.at);
    else if (e.type === 'tool_call_started') setActivity(`Running ${e.data.name}…`, e.at);
    else if (
      [
        'model_call',
        'tool_call',
        'approval_needed',
        'approval_decided',
        'consent_required',
        'task_resumed',
        'task_finished',
      ].includes(e.type)
    )
      setActivity(null);
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
    if (e.type === 'consent_required') {
      setStatus('awaiting_consent');
      pending.hidden = false;
      fill(
        pending,
        el('h2', {}, 'Waiting for the owner to connect their own account for ', el('code', {}, e.data.toolset)),
        el('p', {}, connectLink(e.data.connect_url) ?? 'They connect it with toolshift secrets set.'),
      );
    }
    // A consent needs no decision here: the call made again (its start or its end) ends the wait.
    const consented =
      ['tool_call_started', 'tool_call', 'toolset_change'].includes(e.type) && pending.dataset.consent !== undefined;
    if (e.type === 'consent_required') pending.dataset.consent = '';
    if (e.type === 'approval_decided' || e.type === 'task_resumed' || consented) {
      delete pending.dataset.consent;
      pending.hidden = true;
      pending.replaceChildren();
      setStatus('running');
    }
  };
  // The event names, from the contract (the page lists them); the streamed text is not a recorded event.
  for (const type of view.dataset.eventTypes.split(' ')) {
    if (type === 'model_delta') source.addEventListener(type, (message) => live.delta(JSON.parse(message.data).data));
    else source.addEventListener(type, onEvent);
  }
  source.addEventListener('result', (message) => {
    source.close();
    const r = JSON.parse(message.data);
    setStatus(r.status);
    state.textContent = 'Finished.';
    state.dataset.state = 'finished';
    pending.hidden = true;
    const box = view.querySelector('[data-result]');
    box.hidden = false;
    setActivity(null);
    box.classList.toggle('failed', r.status !== 'completed');
    // The CLI's summary: outcome, steps, time, tokens, the tool definitions saved, toolsets.
    const u = r.usage ?? { total_tokens: 0, prompt_tokens: 0, completion_tokens: 0 };
    const facts = [
      plural(r.steps, 'step'),
      r.duration_ms !== undefined ? elapsed(r.duration_ms) : null,
      `${num(u.total_tokens)} tokens (prompt ${num(u.prompt_tokens)}${u.cached_tokens !== undefined ? `, cached ${num(u.cached_tokens)}` : ''}${u.cache_write_tokens ? `, cache written ${num(u.cache_write_tokens)}` : ''}, completion ${num(u.completion_tokens)})`,
      r.tokens
        ? `tool definitions ${num(r.tokens.tool_definition_tokens)} tokens, ${r.tokens.all_toolsets_not_counted?.length ? 'at least ' : ''}${num(Math.max(0, r.tokens.all_toolsets_tool_tokens - r.tokens.tool_definition_tokens))} saved vs all toolsets loaded`
        : null,
      `toolsets: ${r.toolsets_used.join(', ') || 'none'}`,
    ].filter((x) => x !== null);
    fill(
      box,
      el('h2', {}, `Result: ${r.status.replace('_', ' ')}`),
      r.final_answer ? el('blockquote', {}, r.final_answer) : null,
      r.error ? el('p', { class: 'reason' }, r.error) : null,
      el(
        'ul',
        { class: 'summary', 'data-summary': true },
        facts.map((f) => el('li', {}, f)),
      ),
    );
    for (const b of view.querySelectorAll('[data-cancel]')) b.remove();
    // A banner about this task (approved, cancelled) ends with it: the result says what became of it.
    const banner = document.querySelector('.flash');
    if (banner && !banner.classList.contains('error')) banner.hidden = true;
  });
}
