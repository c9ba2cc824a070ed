import { agentRoutes, type IfBusy, TaskAccepted, type ToolExposure } from '../agent-server/contract.ts';
import { callRoute, type ServiceEndpoint, ServiceError } from '../lib/http/http-client.ts';
import { type CliIo, EXIT, UsageError } from './io.ts';
import { watchTask } from './watch.ts';

// `toolshift run`: submit the task without waiting (it runs apart from this process), then follow its
// events; `--detach` prints the id and leaves it running.

/** The flags `run` reads. */
export interface RunFlags {
  session?: string;
  maxSteps?: number;
  maxDurationS?: number;
  json: boolean;
  quiet: boolean;
  cancelOnInterrupt: boolean;
  detach: boolean;
  /** How approvals are answered while following: ask on a terminal, or all yes / all no. */
  approvals: 'ask' | 'approve' | 'deny';
  /** A playbook to run instead of a goal, with its arguments. */
  prompt?: string;
  promptArgs?: Record<string, string>;
  /** How the model sees the tools; the server's TOOL_EXPOSURE when absent. */
  exposure?: ToolExposure;
  /** The thread the task continues (a new one when absent), and what to do if its last task runs. */
  thread?: string;
  ifBusy?: IfBusy;
}

/** execute_task as `run` uses it: `wait: false`, answered 202 with the task's id. */
export const submitRoute = { ...agentRoutes.executeTask, responses: { 200: TaskAccepted } };

/** The goal from the arguments, or all of stdin for `run -`. */
async function goalOf(args: string[], io: CliIo): Promise<string> {
  if (args.length === 1 && args[0] === '-') {
    if (!io.readStdin)
      throw new UsageError('run - reads the goal from stdin, which is not available here', 'run');
    return (await io.readStdin()).trim();
  }
  return args.join(' ').trim();
}

/** How long `run` waits for room on a busy agent-server before giving up. */
const MAX_WAIT_FOR_ROOM_MS = 30 * 60_000;

/**
 * Submits the task; while the agent-server runs as many tasks as it may (503), waits as long as its
 * `retry-after` says and tries again, saying so on stderr, for up to 30 minutes.
 */
export async function submitWhenRoom(
  agent: ServiceEndpoint,
  io: CliIo,
  input: Parameters<typeof callRoute<typeof submitRoute>>[2],
) {
  let retryAfter: string | null = null;
  const doFetch = agent.fetch ?? fetch;
  const watched: ServiceEndpoint = {
    ...agent,
    fetch: async (url, init) => {
      const res = await doFetch(url, init);
      retryAfter = res.headers.get('retry-after');
      return res;
    },
  };
  const now = io.now ?? Date.now;
  const started = now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await callRoute(watched, submitRoute, input);
    } catch (err) {
      const waited = now() - started;
      // Busy is a 503 with retry-after; one without (no model configured) will not pass by waiting.
      const busy = err instanceof ServiceError && err.status === 503 && retryAfter !== null;
      if (!busy || waited >= MAX_WAIT_FOR_ROOM_MS) throw err;
      const seconds = Math.min(Math.max(Number(retryAfter) || 5, 1), 60);
      const message = (err as ServiceError).message;
      io.stderr(
        attempt === 1
          ? `${message.replace(/; retry shortly$/, '')}.\nwaiting for room: trying again every ${seconds}s (Ctrl-C gives up; nothing was started)…\n`
          : `still waiting for room (${Math.round(waited / 1000)}s)…\n`,
      );
      await (io.sleep ?? ((ms: number) => new Promise((r) => setTimeout(r, ms))))(seconds * 1000);
    }
  }
}

/** Runs `toolshift run`; resolves to the exit code. */
export async function runTask(
  args: string[],
  flags: RunFlags,
  agent: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const goal = flags.prompt ? '' : await goalOf(args, io);
  if (flags.prompt && args.length > 0) {
    throw new UsageError('run takes a goal or --prompt NAME (with --arg key=value), not both', 'run');
  }
  if (!goal && !flags.prompt) {
    throw new UsageError(
      'run needs a goal, e.g. toolshift run "list the files in the workspace" (or run - for stdin)',
      'run',
    );
  }
  const accepted = await submitWhenRoom(agent, io, {
    body: {
      ...(flags.prompt ? { prompt: { name: flags.prompt, arguments: flags.promptArgs ?? {} } } : { goal }),
      session_id: flags.session,
      thread_id: flags.thread,
      if_busy: flags.ifBusy,
      max_steps: flags.maxSteps,
      max_duration_s: flags.maxDurationS,
      exposure: flags.exposure,
      wait: false,
    },
  });
  if (flags.detach) {
    if (flags.json) io.stdout(`${JSON.stringify(accepted)}\n`);
    else {
      io.stdout(`${accepted.task_id}\n`);
      if (!flags.quiet) {
        io.stderr(
          `task ${accepted.task_id} is running (session ${accepted.session_id}, thread ${accepted.thread_id}).\n` +
            `  follow it: toolshift tasks watch ${accepted.task_id}\n` +
            continueLine(accepted.thread_id),
        );
      }
    }
    return EXIT.ok;
  }
  const code = await watchTask(agent, accepted.task_id, flags, io);
  // Detached (130) or unreachable (3), watchTask said what to do; a task that ended can be followed up.
  if (!flags.json && !flags.quiet && (code === EXIT.ok || code === EXIT.failed)) {
    io.stderr(continueLine(accepted.thread_id));
  }
  return code;
}

/** How to go on with a thread from the shell. */
export const continueLine = (threadId: string) => `  continue it: toolshift run --thread ${threadId} "…"\n`;
