import type { TaskEvent } from '../agent-server/contract.ts';
import type { Style } from './style.ts';

// The line each of a task's events prints (cli/render.ts draws them above its spinner): model steps and
// retries, tool calls, toolset changes, approvals and resumptions.

/** Formats a number with thousands separators. */
export const num = (n: number) => Math.round(n).toLocaleString('en-US');

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

/** What a model request carries: its tools, their tokens and the messages' tokens. */
export function requestSize(d: Data): string {
  const tools = (d.tools as string[]).length;
  return `${tools} tool${tools === 1 ? '' : 's'} (${num(d.tool_tokens as number)} tokens) · ${num(d.message_tokens as number)} message tokens`;
}

type LineOf = (d: Data, s: Style, e: TaskEvent) => string;

function modelRetry(d: Data, s: Style): string {
  const status = d.status === null ? 'no answer' : `HTTP ${d.status}`;
  return s.yellow(
    `↻ step ${d.step} · model call failed (${status}): ${d.reason}; retrying in ${duration(d.delay_ms as number)} (attempt ${(d.attempt as number) + 1})`,
  );
}

function modelCall(d: Data, s: Style, e: TaskEvent): string {
  const calls = (d.tool_calls as { name: string }[]).map((c) => c.name);
  const retried = (d.attempts as number) > 1 ? s.yellow(` after ${d.attempts} attempts`) : '';
  const answer = calls.length > 0 ? calls.join(', ') : 'answer';
  return `step ${d.step} · model ${duration(e.duration_ms ?? 0)}${retried} → ${s.bold(answer)}`;
}

function toolCall(d: Data, s: Style, e: TaskEvent): string {
  const took = duration(e.duration_ms ?? 0);
  const label = callLabel(String(d.name), d.arguments);
  // A call a run_code script made sits under the script.
  const at = d.in_script ? '      ' : '  ';
  if (d.ok) return `${at}${s.green('✓')} ${label} ${s.dim(`${took} · ${bytes(d.result_bytes as number)}`)}`;
  return `${at}${s.red('✗')} ${label} ${s.dim(took)}: ${s.red(String(d.output).slice(0, 200))}`;
}

/** How many lines of a run_code script its start shows. */
const SCRIPT_LINES = 12;

/** A call starts; a run_code call shows its script (its first lines), a script's call sits under it. */
function toolCallStarted(d: Data, s: Style): string {
  if (d.in_script) return s.dim(`      ▸ ${d.name}`);
  if (typeof d.script !== 'string') return s.dim(`  ▸ ${d.name}`);
  const lines = d.script.replace(/\n+$/, '').split('\n');
  const shown = lines.slice(0, SCRIPT_LINES).map((l) => `    │ ${l.slice(0, 160)}`);
  if (lines.length > SCRIPT_LINES) shown.push(`    │ … ${lines.length - SCRIPT_LINES} more lines`);
  return s.dim([`  ▸ ${d.name}`, ...shown].join('\n'));
}

function toolsetChange(d: Data, s: Style): string {
  const added = (d.added_tools as string[]).length;
  const removed = (d.removed_tools as string[]).length;
  const t = d.tool_definition_tokens as { change: number; total: number } | undefined;
  const tokens = t
    ? `, ${t.change >= 0 ? '+' : '−'}${num(Math.abs(t.change))} tokens (${num(t.total)} in all)`
    : '';
  const verb = d.action === 'ACTIVATE' ? '✚ activated' : '✖ deactivated';
  // Activated by the agent before the first model call (goal priming), not by the model.
  const why = d.primed === true ? ' for the goal' : '';
  return `  ${s.magenta(s.bold(`${verb} ${(d.toolset_ids as string[]).join(', ')}${why}`))}${s.magenta(`: +${added} −${removed} tools${tokens}`)}`;
}

/** Who decided, and why, as the decision records them (the message when it names neither). */
function approvalDecided(d: Data, s: Style): string {
  const by = d.decided_by
    ? s.dim(` by ${d.decided_by}${d.reason ? `: ${d.reason}` : ''}`)
    : d.message
      ? s.dim(`: ${d.message}`)
      : '';
  return `  ${d.approved ? s.green('✓ approved') : s.red('✗ not approved')}${by}`;
}

function taskResumed(d: Data, s: Style): string {
  const from = d.step === null ? 'from its start' : `from step ${d.step}`;
  const open = d.unknown ? (d.rerun ? `; ${d.unknown} runs again` : `; ${d.unknown} may have run`) : '';
  return `  ${s.yellow('↻ resumed')} on ${d.worker} ${from}${open}`;
}

/** The line of each event that prints one (a model request's only when no spinner shows it). */
const LINES: Partial<Record<TaskEvent['type'], LineOf>> = {
  task_started: (d, s) => s.dim(`task ${d.task_id} · session ${d.session_id} · model ${d.model ?? '?'}`),
  model_request: (d) => `step ${d.step} · asking the model · ${requestSize(d)}`,
  model_retry: modelRetry,
  model_call: modelCall,
  tool_call_started: toolCallStarted,
  tool_call: toolCall,
  toolset_change: toolsetChange,
  approval_needed: (d, s) =>
    `  ${s.yellow('⏸')} waiting for a human: ${d.kind === 'activate' ? `activate ${d.subject}` : d.subject}`,
  approval_decided: approvalDecided,
  consent_required: (d, s) =>
    `  ${s.yellow('⏸')} waiting for you to connect your own account for ${d.toolset}` +
    (d.connect_url ? `: ${d.connect_url}` : ''),
  task_resumed: taskResumed,
  context_compacted: (d, s) =>
    s.dim(
      `  context compacted: ${d.stubbed} results moved out, ${d.summarised_messages} messages summarised, ` +
        `tokens ${num(d.tokens_before as number)} → ${num(d.tokens_after as number)}`,
    ),
  limit_wait: (d, s) =>
    `  ${s.yellow('⏸')} ${d.subject} reached ${d.limit}: waiting ${d.seconds} s for the next window`,
};

/** The line `e` prints, or undefined for an event that prints none. */
export function eventLine(e: TaskEvent, s: Style): string | undefined {
  return LINES[e.type]?.(e.data as Data, s, e);
}
