import type { ExecuteTaskResponse, TaskEvent } from '../agent-server/contract.ts';
import type { Style } from './style.ts';

// How a task's events look on a terminal: a spinner with elapsed time while the model thinks or a tool runs,
// a line per retry, per tool call start and end, toolset changes highlighted, and a summary. Piped, the same
// lines without the spinner and colour.

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const CLEAR_LINE = '\r\x1b[K';

/** What the progress display needs. */
export interface ProgressOptions {
  write: (text: string) => void;
  style: Style;
  /** A terminal: draw a spinner line that is redrawn in place. */
  live: boolean;
  now: () => number;
  setInterval: (fn: () => void, ms: number) => unknown;
  clearInterval: (handle: unknown) => void;
}

/** Formats a number with thousands separators. */
export const num = (n: number) => Math.round(n).toLocaleString('en-US');

/** How long ago `iso` was, in the largest whole unit: "12s ago", "5m ago", "3h ago", "2d ago". */
export function age(iso: string, now: number): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (!Number.isFinite(s)) return '?';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** Seconds with one decimal, or milliseconds below a second. */
export function duration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)}s`;
}

function bytes(n: number): string {
  return n < 1024
    ? `${n} B`
    : n < 1024 * 1024
      ? `${(n / 1024).toFixed(1)} KB`
      : `${(n / 1048576).toFixed(1)} MB`;
}

type Data = Record<string, unknown>;

/** A call as a line shows it: manage_toolsets with its action and query or ids (LIST "git"), others by name. */
function callLabel(name: string, args: unknown): string {
  if (name !== 'manage_toolsets' || !args || typeof args !== 'object') return name;
  const a = args as { action?: unknown; query?: unknown; toolset_ids?: unknown };
  const what = [
    typeof a.action === 'string' ? a.action : '',
    typeof a.query === 'string' && a.query ? JSON.stringify(a.query.slice(0, 80)) : '',
    Array.isArray(a.toolset_ids) ? a.toolset_ids.filter((x) => typeof x === 'string').join(', ') : '',
  ].filter(Boolean);
  return what.length > 0 ? `${name} ${what.join(' ')}` : name;
}

/** The progress display of one task: feed it events; `pause` while asking the user something. */
export function createProgress(opts: ProgressOptions) {
  const { style: s, write } = opts;
  let activity: { label: string; since: number } | undefined;
  let timer: unknown;
  let frame = 0;
  let paused = false;
  let drawn = false;

  const clear = () => {
    if (drawn) write(CLEAR_LINE);
    drawn = false;
  };
  const draw = () => {
    if (!opts.live || paused || !activity) return;
    const elapsed = duration(opts.now() - activity.since);
    write(`${CLEAR_LINE}${s.cyan(FRAMES[frame++ % FRAMES.length])} ${activity.label} ${s.dim(elapsed)}`);
    drawn = true;
  };
  /** `at`: when the event happened, so following a task late counts from then, not from attaching. */
  const startActivity = (label: string, at?: string) => {
    const then = at ? Date.parse(at) : Number.NaN;
    activity = { label, since: Number.isFinite(then) ? Math.min(then, opts.now()) : opts.now() };
    if (!opts.live) return;
    if (timer === undefined) timer = opts.setInterval(draw, 100);
    draw();
  };
  const endActivity = () => {
    activity = undefined;
    clear();
    if (timer !== undefined) opts.clearInterval(timer);
    timer = undefined;
  };
  /** Prints a line above the spinner, which is redrawn under it. */
  const line = (text: string) => {
    clear();
    write(`${text}\n`);
    draw();
  };

  const onEvent = (e: TaskEvent) => {
    const d = e.data as Data;
    switch (e.type) {
      case 'task_started':
        line(s.dim(`task ${d.task_id} · session ${d.session_id} · model ${d.model ?? '?'}`));
        break;
      case 'model_request': {
        const tools = (d.tools as string[]).length;
        const what = `${tools} tool${tools === 1 ? '' : 's'} (${num(d.tool_tokens as number)} tokens) · ${num(d.message_tokens as number)} message tokens`;
        if (opts.live) startActivity(`step ${d.step} · thinking… ${s.dim(what)}`, e.at);
        else line(`step ${d.step} · asking the model · ${what}`);
        break;
      }
      case 'model_retry': {
        const status = d.status === null ? 'no answer' : `HTTP ${d.status}`;
        line(
          s.yellow(
            `↻ step ${d.step} · model call failed (${status}): ${d.reason}; retrying in ${duration(d.delay_ms as number)} (attempt ${(d.attempt as number) + 1})`,
          ),
        );
        break;
      }
      case 'model_call': {
        endActivity();
        const calls = (d.tool_calls as { name: string }[]).map((c) => c.name);
        const retried = (d.attempts as number) > 1 ? s.yellow(` after ${d.attempts} attempts`) : '';
        const answer = calls.length > 0 ? calls.join(', ') : 'answer';
        line(`step ${d.step} · model ${duration(e.duration_ms ?? 0)}${retried} → ${s.bold(answer)}`);
        break;
      }
      case 'tool_call_started':
        line(s.dim(`  ▸ ${d.name}`));
        if (opts.live) startActivity(`running ${d.name}…`, e.at);
        break;
      case 'tool_call': {
        endActivity();
        const took = duration(e.duration_ms ?? 0);
        const label = callLabel(String(d.name), d.arguments);
        if (d.ok) line(`  ${s.green('✓')} ${label} ${s.dim(`${took} · ${bytes(d.result_bytes as number)}`)}`);
        else line(`  ${s.red('✗')} ${label} ${s.dim(took)}: ${s.red(String(d.output).slice(0, 200))}`);
        break;
      }
      case 'toolset_change': {
        endActivity();
        const added = (d.added_tools as string[]).length;
        const removed = (d.removed_tools as string[]).length;
        const t = d.tool_definition_tokens as { change: number; total: number } | undefined;
        const tokens = t
          ? `, ${t.change >= 0 ? '+' : '−'}${num(Math.abs(t.change))} tokens (${num(t.total)} in all)`
          : '';
        const verb = d.action === 'ACTIVATE' ? '✚ activated' : '✖ deactivated';
        // Activated by the agent before the first model call (goal priming), not by the model.
        const why = d.primed === true ? ' for the goal' : '';
        line(
          `  ${s.magenta(s.bold(`${verb} ${(d.toolset_ids as string[]).join(', ')}${why}`))}${s.magenta(`: +${added} −${removed} tools${tokens}`)}`,
        );
        break;
      }
      case 'approval_needed':
        endActivity();
        line(
          `  ${s.yellow('⏸')} waiting for a human: ${d.kind === 'activate' ? `activate ${d.subject}` : d.subject}`,
        );
        break;
      case 'approval_decided':
        // Who decided, and why, as the decision records them (the message when it names neither).
        line(
          `  ${d.approved ? s.green('✓ approved') : s.red('✗ not approved')}${
            d.decided_by
              ? s.dim(` by ${d.decided_by}${d.reason ? `: ${d.reason}` : ''}`)
              : d.message
                ? s.dim(`: ${d.message}`)
                : ''
          }`,
        );
        break;
      case 'task_resumed': {
        const from = d.step === null ? 'from its start' : `from step ${d.step}`;
        const open = d.unknown ? (d.rerun ? `; ${d.unknown} runs again` : `; ${d.unknown} may have run`) : '';
        line(`  ${s.yellow('↻ resumed')} on ${d.worker} ${from}${open}`);
        break;
      }
      case 'task_finished':
        endActivity();
        break;
      default:
        break;
    }
  };

  return {
    onEvent,
    /** Stops drawing (for a question to the user); `resume` draws again. */
    pause() {
      paused = true;
      clear();
    },
    resume() {
      paused = false;
      draw();
    },
    /** Writes a line as the display does (above the spinner). */
    line,
    stop: endActivity,
  };
}

/**
 * What the task's tool definitions cost and saved against every enabled toolset loaded, from what is known:
 * toolsets whose servers never started have no known size, so the saving is "at least" and they are named.
 * Nothing when no model request was answered (nothing was sent, nothing saved).
 */
export function savingText(t: NonNullable<ExecuteTaskResponse['tokens']>): string | undefined {
  if (t.requests === 0) return undefined;
  const saved = Math.max(0, t.all_toolsets_tool_tokens - t.tool_definition_tokens);
  const notCounted = t.all_toolsets_not_counted ?? [];
  const sent = `tool definitions ${num(t.tool_definition_tokens)} tokens`;
  if (notCounted.length === 0) return `${sent}, ${num(saved)} saved vs all toolsets loaded`;
  return (
    `${sent}, at least ${num(saved)} saved vs all toolsets loaded ` +
    `(not counted: ${notCounted.join(', ')}, not started yet)`
  );
}

/** The closing summary: outcome, steps, time, tokens, tool-definition tokens saved, toolsets, ids. */
export function summary(r: ExecuteTaskResponse, s: Style): string {
  const ok = r.status === 'completed';
  const mark = ok ? s.green('✔') : s.red('✘');
  const parts = [
    `${mark} ${s.bold(r.status)} in ${r.steps} step${r.steps === 1 ? '' : 's'}`,
    ...(r.duration_ms !== undefined ? [duration(r.duration_ms)] : []),
    `${num(r.usage.total_tokens)} tokens (prompt ${num(r.usage.prompt_tokens)}, completion ${num(r.usage.completion_tokens)})`,
  ];
  const saving = r.tokens && savingText(r.tokens);
  if (saving) parts.push(saving);
  parts.push(`toolsets: ${r.toolsets_used.length > 0 ? r.toolsets_used.join(', ') : 'none'}`);
  const lines = [parts.join(' · '), s.dim(`  task ${r.task_id} · session ${r.session_id}`)];
  if (r.error) lines.push(s.red(`  error: ${r.error}`));
  return `${lines.join('\n')}\n`;
}
