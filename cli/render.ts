import type { ExecuteTaskResponse, ModelDeltaEvent, TaskEvent } from '../agent-server/contract.ts';
import { duration, eventLine, num, requestSize } from './event-lines.ts';
import type { Style } from './style.ts';

// How a task's events look on a terminal: a spinner with elapsed time while the model thinks or a tool runs,
// the model's text as it streams, a line per retry, per tool call start and end, toolset changes highlighted,
// and a summary. Piped, the same lines without the spinner, the streamed text and colour.

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const CLEAR_LINE = '\r\x1b[K';
/** Control characters but newline and tab: a model's text may not send them to the terminal (escape sequences). */
const CONTROL = /[^\P{Cc}\n\t]/gu;
/** The events that end what the spinner shows: an answer, a call's end, a change, a wait, the end. */
const ENDS_ACTIVITY = new Set<TaskEvent['type']>([
  'model_call',
  'tool_call',
  'toolset_change',
  'approval_needed',
  'consent_required',
  'task_finished',
]);

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

/** How long ago `iso` was, in the largest whole unit: "12s ago", "5m ago", "3h ago", "2d ago". */
export function age(iso: string, now: number): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (!Number.isFinite(s)) return '?';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** The progress display of one task (createProgress). */
export type Progress = ReturnType<typeof createProgress>;

/** The progress display of one task: feed it events; `pause` while asking the user something. */
export function createProgress(opts: ProgressOptions) {
  const { style: s, write } = opts;
  let activity: { label: string; since: number } | undefined;
  let timer: unknown;
  let frame = 0;
  let paused = false;
  let drawn = false;
  const streaming = streamedText(write);
  const endText = streaming.end;

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
    endText();
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
    endText();
    write(`${text}\n`);
    draw();
  };

  /** On a terminal, the model's text as it comes, in place of the spinner. */
  const onDelta = (e: ModelDeltaEvent) => {
    if (opts.live) streaming.take(e.data, !paused, endActivity);
  };

  const onEvent = (e: TaskEvent) => {
    if (e.type === 'model_call') streaming.answered(e.data.step);
    if (ENDS_ACTIVITY.has(e.type)) endActivity();
    // On a terminal the spinner shows the model thinking; piped, a line says it was asked.
    if (e.type === 'model_request' && opts.live) {
      startActivity(`step ${e.data.step} · thinking… ${s.dim(requestSize(e.data))}`, e.at);
      return;
    }
    const text = eventLine(e, s);
    if (text !== undefined) line(text);
    if (e.type === 'tool_call_started' && opts.live) startActivity(`running ${e.data.name}…`, e.at);
  };

  return {
    onEvent,
    onDelta,
    /** The text of the last reply shown whole as it streamed (undefined: none was). */
    streamed: streaming.streamed,
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
    stop() {
      endActivity();
      endText();
    },
  };
}

/**
 * The model's text as it streams, written as it comes: a later attempt's starts over (the earlier one failed),
 * and a step whose reply is in takes no more. What was shown is kept, so the answer is not printed twice.
 */
function streamedText(write: (text: string) => void) {
  let text: { step: number; attempt: number; shown: string; whole: boolean } | undefined;
  /** The text stopped mid-line. */
  let midLine = false;
  /** The last step whose reply is in. */
  let answered = 0;
  /** Ends the text's line, so what comes next starts on its own. */
  const end = () => {
    if (midLine) write('\n');
    midLine = false;
  };
  return {
    end,
    answered(step: number) {
      answered = Math.max(answered, step);
    },
    /** Takes a piece; `show` false (the user is asked something) keeps it unshown. `before` runs before a write. */
    take(d: ModelDeltaEvent['data'], show: boolean, before: () => void) {
      if (d.step <= answered || (text && text.step === d.step && d.attempt < text.attempt)) return;
      if (!text || text.step !== d.step || text.attempt !== d.attempt) {
        end();
        text = { step: d.step, attempt: d.attempt, shown: '', whole: true };
      }
      text.shown += d.text;
      if (!show) {
        text.whole = false;
        return;
      }
      before();
      const plain = d.text.replace(CONTROL, '');
      write(plain);
      if (plain) midLine = !plain.endsWith('\n');
    },
    streamed: () => (text?.whole ? text.shown : undefined),
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

/** The prompt tokens the provider served from its cache and wrote to it, where it reported them. */
function cacheText(u: ExecuteTaskResponse['usage']): string {
  const read = u.cached_tokens !== undefined ? `, cached ${num(u.cached_tokens)}` : '';
  const written = u.cache_write_tokens ? `, cache written ${num(u.cache_write_tokens)}` : '';
  return read + written;
}

/** The closing summary: outcome, steps, time, tokens, tool-definition tokens saved, toolsets, ids. */
export function summary(r: ExecuteTaskResponse, s: Style): string {
  const ok = r.status === 'completed';
  const mark = ok ? s.green('✔') : s.red('✘');
  const parts = [
    `${mark} ${s.bold(r.status)} in ${r.steps} step${r.steps === 1 ? '' : 's'}`,
    ...(r.duration_ms !== undefined ? [duration(r.duration_ms)] : []),
    `${num(r.usage.total_tokens)} tokens (prompt ${num(r.usage.prompt_tokens)}${cacheText(r.usage)}, completion ${num(r.usage.completion_tokens)})`,
  ];
  const saving = r.tokens && savingText(r.tokens);
  if (saving) parts.push(saving);
  parts.push(`toolsets: ${r.toolsets_used.length > 0 ? r.toolsets_used.join(', ') : 'none'}`);
  const lines = [parts.join(' · '), s.dim(`  task ${r.task_id} · session ${r.session_id}`)];
  if (r.error) lines.push(s.red(`  error: ${r.error}`));
  return `${lines.join('\n')}\n`;
}
