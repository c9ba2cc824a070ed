import type { ExecuteTaskResponse, PendingApproval, TaskEvent } from '../agent-server/contract.ts';
import { agentRoutes } from '../agent-server/contract.ts';
import { callRoute, type ServiceEndpoint } from '../lib/http/http-client.ts';
import { decide, describePending } from './approvals.ts';
import { type FollowOptions, followTask } from './follow.ts';
import { type CliIo, EXIT, rootCause, UnreachableError } from './io.ts';
import { createProgress, type Progress, summary } from './render.ts';
import { colourWanted, createStyle, type Style } from './style.ts';

// Watching a task to its end, for `run` and `tasks watch`: progress on stderr (or JSON lines on stdout), with
// the model's text as it streams on a terminal, the answer alone on stdout, and Ctrl-C handled the way the README promises: the first asks, the second cancels.

/** How the output looks. */
export interface WatchOptions {
  json: boolean;
  quiet: boolean;
  /** Ctrl-C cancels the task on the server at once instead of asking. */
  cancelOnInterrupt: boolean;
  /** How approvals the task waits for are answered: ask on a terminal (default), or all yes / all no. */
  approvals?: 'ask' | 'approve' | 'deny';
}

/** The question the first Ctrl-C asks. */
export const CANCEL_QUESTION = 'cancel the task? (the server keeps running it if you detach)';

/** What the parts of one watch share. */
interface Watch {
  agent: ServiceEndpoint;
  taskId: string;
  opts: WatchOptions;
  io: CliIo;
  style: Style;
  progress: Progress;
  /** Aborted to stop following (the user detached). */
  detach: AbortController;
  /** Aborted to drop a question on the terminal that no longer needs an answer. */
  asking: AbortController;
}

/** Follows `taskId` to its result and returns the exit code. */
export async function watchTask(
  agent: ServiceEndpoint,
  taskId: string,
  opts: WatchOptions,
  io: CliIo,
): Promise<number> {
  const style = createStyle(colourWanted(io.stderrIsTTY, io.env));
  const progress = createProgress({
    write: io.stderr,
    style,
    live: io.stderrIsTTY === true,
    now: io.now ?? Date.now,
    setInterval: io.setInterval ?? ((fn, ms) => setInterval(fn, ms)),
    clearInterval: io.clearInterval ?? ((h) => clearInterval(h as NodeJS.Timeout)),
  });
  const w: Watch = {
    agent,
    taskId,
    opts,
    io,
    style,
    progress,
    detach: new AbortController(),
    asking: new AbortController(),
  };
  const decided = new Set<string>();
  const onApproval = approvalAnswers(w, decided);
  const show = (e: TaskEvent) => {
    if (opts.json) io.stdout(`${JSON.stringify(e)}\n`);
    else if (!opts.quiet) progress.onEvent(e);
    if (e.type === 'approval_decided') decided.add(String(e.data.call_id));
    if (e.type === 'approval_needed') {
      onApproval(e.data as unknown as PendingApproval).catch((err: Error) =>
        progress.line(style.red(`could not answer the approval: ${err.message}`)),
      );
    }
  };
  const interrupts = onInterrupts(w);
  let result: ExecuteTaskResponse;
  try {
    result = await followTask(agent, taskId, {
      onEvent: show,
      ...(opts.json || opts.quiet ? {} : { onDelta: progress.onDelta }),
      signal: w.detach.signal,
      onConnection: connectionLines(w),
      ...(io.reconnectForMs !== undefined ? { reconnectForMs: io.reconnectForMs } : {}),
    });
  } catch (err) {
    // The spinner goes first, so the error is on a line of its own and nothing keeps drawing.
    progress.stop();
    return stoppedFollowing(w, err);
  } finally {
    interrupts.stop();
    w.asking.abort();
  }
  progress.stop();
  if (opts.json) io.stdout(`${JSON.stringify({ type: 'result', ...result })}\n`);
  // On a terminal, an answer already shown as it streamed is not printed twice.
  else if (result.final_answer && !(io.stdoutIsTTY && progress.streamed() === result.final_answer)) {
    io.stdout(`${result.final_answer}\n`);
  }
  if (!opts.json && !opts.quiet) io.stderr(summary(result, style));
  else if (result.error && !opts.json) io.stderr(`error: ${result.error}\n`);
  return result.status === 'completed' ? EXIT.ok : EXIT.failed;
}

/** Answers what the task waits for: by flag, by asking on a terminal, or by saying how to decide. */
function approvalAnswers({ agent, taskId, opts, io, style, progress, asking }: Watch, decided: Set<string>) {
  return async (p: PendingApproval): Promise<void> => {
    const send = (approve: boolean) =>
      decide(agent, taskId, p.call_id, approve).then(
        () =>
          !opts.json &&
          progress.line(style.yellow(`${approve ? 'approved' : 'denied'}: ${describePending(p)}`)),
        // A replayed request that was decided long ago answers 404/409: nothing to do.
        () => undefined,
      );
    const mode = opts.approvals ?? 'ask';
    if (mode !== 'ask') {
      await send(mode === 'approve');
      return;
    }
    if (io.stdinIsTTY && io.readLine && !opts.json) {
      progress.pause();
      io.stderr(`\n${style.bold('approve?')} ${describePending(p)} [y/N] `);
      const answer = await io.readLine(asking.signal).catch(() => undefined);
      progress.resume();
      if (asking.signal.aborted || decided.has(p.call_id)) return;
      await send(/^\s*y(es)?\s*$/i.test(answer ?? ''));
      return;
    }
    if (!opts.json) {
      progress.line(
        style.yellow(`task waits for approval: ${describePending(p)}\n`) +
          `  decide: toolshift approvals approve|deny ${taskId} ${p.call_id}`,
      );
    }
  };
}

/** Ctrl-C: the first asks (cancel or detach), the second (or the first with --cancel-on-interrupt) cancels. */
function onInterrupts({ agent, taskId, opts, io, style, progress, detach, asking }: Watch): { stop(): void } {
  let interrupts = 0;
  let cancelling = false;
  let detachTimer: NodeJS.Timeout | undefined;
  const cancel = () => {
    if (cancelling) return;
    cancelling = true;
    asking.abort();
    clearTimeout(detachTimer);
    progress.resume();
    progress.line(style.yellow(`cancelling task ${taskId} on the server…`));
    callRoute(agent, agentRoutes.cancelTask, { params: { id: taskId } }).catch((err: Error) =>
      progress.line(style.red(`could not cancel: ${err.message}`)),
    );
  };
  const ask = async () => {
    progress.pause();
    if (io.stdinIsTTY && io.readLine) {
      io.stderr(`\n${style.bold(CANCEL_QUESTION)} [y = cancel, N = detach, Ctrl-C = cancel] `);
      const answer = await io.readLine(asking.signal).catch(() => undefined);
      if (asking.signal.aborted || cancelling) return;
      if (/^\s*y(es)?\s*$/i.test(answer ?? '')) cancel();
      else detach.abort();
      return;
    }
    const wait = io.detachAfterMs ?? 3000;
    io.stderr(
      `\n${style.bold(CANCEL_QUESTION)}\nCtrl-C again cancels it on the server; detaching in ${Math.round(wait / 1000)}s otherwise.\n`,
    );
    detachTimer = setTimeout(() => detach.abort(), wait);
  };
  const unsubscribe = io.onInterrupt?.(() => {
    interrupts++;
    if (opts.cancelOnInterrupt || interrupts >= 2) cancel();
    else {
      ask().catch((err: Error) => progress.line(style.red(`could not ask: ${err.message}`)));
    }
  });
  return {
    stop() {
      unsubscribe?.();
      clearTimeout(detachTimer);
    },
  };
}

/** A line when the agent-server goes away mid-task, and one when it is back. */
function connectionLines({ taskId, style, progress }: Watch): FollowOptions['onConnection'] {
  return (state) =>
    progress.line(
      state.lost
        ? style.yellow(
            `lost the agent-server at ${state.reason.replace(/^cannot reach the agent-server at /, '').replace(/\. Is toolshift running\?.*$/s, '')}; ` +
              `reconnecting for up to ${Math.round(state.tryingForMs / 1000)}s…`,
          )
        : style.yellow(`reconnected; following task ${taskId} again`),
    );
}

/** Following ended without a result: the user detached, or the daemon did not come back; else `err` again. */
function stoppedFollowing({ taskId, io, detach }: Watch, err: unknown): number {
  if (!detach.signal.aborted) {
    const cause = rootCause(err);
    if (!(cause instanceof UnreachableError)) throw err;
    // The daemon did not come back in time: the task is not lost, it goes on (or resumes) when it does.
    io.stderr(
      `error: ${cause.message}\n` +
        `  task ${taskId} keeps its state on the server; once toolshift is back: toolshift tasks watch ${taskId}\n`,
    );
    return EXIT.unreachable;
  }
  io.stderr(
    `\ndetached: task ${taskId} keeps running on the server.\n` +
      `  follow it again: toolshift tasks watch ${taskId}\n` +
      `  cancel it:       toolshift tasks cancel ${taskId}\n`,
  );
  return EXIT.detached;
}
