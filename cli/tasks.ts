import { agentRoutes, isLive } from '../agent-server/contract.ts';
import { callRoute, type ServiceEndpoint, ServiceError } from '../lib/http/http-client.ts';
import { type CliIo, EXIT, UsageError } from './io.ts';
import { age, createProgress, summary } from './render.ts';
import { createStyle } from './style.ts';
import { type WatchOptions, watchTask } from './watch.ts';

// `toolshift tasks`: list, show, watch (follow a running task) and cancel.

/** The flags `tasks` reads. */
export interface TasksFlags extends WatchOptions {
  limit: number;
}

/** Runs `toolshift tasks …`; resolves to the exit code. */
export async function tasksCommand(
  args: string[],
  flags: TasksFlags,
  agent: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  try {
    return await tasks(args, flags, agent, io);
  } catch (err) {
    // The server's 404 names its HTTP route; a CLI user is told the command instead.
    if (err instanceof ServiceError && err.status === 404 && args[1]) {
      throw new Error(`no task ${args[1]}; toolshift tasks lists the recent ones`);
    }
    throw err;
  }
}

async function tasks(args: string[], flags: TasksFlags, agent: ServiceEndpoint, io: CliIo): Promise<number> {
  const [sub = 'list', id, ...extra] = args;
  if (extra.length > 0) throw new UsageError(`tasks ${sub} takes one task id`, 'tasks');
  const needId = () => {
    if (!id) throw new UsageError(`tasks ${sub} needs a task id (toolshift tasks lists them)`, 'tasks');
    return id;
  };
  switch (sub) {
    case 'list':
      return listTasks(flags, agent, io);
    case 'show':
      return showTask(needId(), flags, agent, io);
    case 'watch':
      return watchTask(agent, needId(), flags, io);
    case 'cancel': {
      const task = await callRoute(agent, agentRoutes.cancelTask, { params: { id: needId() } });
      if (flags.json) io.stdout(`${JSON.stringify(task)}\n`);
      else io.stdout(`task ${task.task_id} ${task.status}\n`);
      return task.status === 'cancelled' ? EXIT.ok : EXIT.failed;
    }
    default:
      throw new UsageError(`unknown tasks command "${sub}"; use list, show, watch or cancel`, 'tasks');
  }
}

/** `tasks list`: the recent tasks, a row each. */
async function listTasks(flags: TasksFlags, agent: ServiceEndpoint, io: CliIo): Promise<number> {
  const { tasks } = await callRoute(agent, agentRoutes.listTasks, {
    query: { limit: String(flags.limit) },
  });
  if (flags.json) {
    io.stdout(`${JSON.stringify(tasks)}\n`);
    return EXIT.ok;
  }
  if (tasks.length === 0) {
    io.stdout('no tasks yet: start one with toolshift run "<goal>"\n');
    return EXIT.ok;
  }
  const now = (io.now ?? Date.now)();
  const idWidth = Math.max(4, ...tasks.map((t) => t.task_id.length));
  const row = (id: string, status: string, steps: string, when: string, goal: string) =>
    `${id.padEnd(idWidth)}  ${status.padEnd(17)} ${steps.padStart(5)}  ${when.padEnd(8)} ${goal}\n`;
  io.stdout(row('TASK', 'STATUS', 'STEPS', 'STARTED', 'GOAL'));
  for (const t of tasks) {
    const goal = t.goal.replace(/\s+/g, ' ');
    io.stdout(
      row(
        t.task_id,
        t.status,
        String(t.steps),
        age(t.created_at, now),
        goal.length > 60 ? `${goal.slice(0, 59)}…` : goal,
      ),
    );
  }
  return EXIT.ok;
}

/** `tasks show ID`: a task's events as `run` printed them, its answer, and the summary once it ended. */
async function showTask(id: string, flags: TasksFlags, agent: ServiceEndpoint, io: CliIo): Promise<number> {
  const task = await callRoute(agent, agentRoutes.getTask, { params: { id } });
  if (flags.json) {
    io.stdout(`${JSON.stringify(task)}\n`);
    return EXIT.ok;
  }
  const style = createStyle(false);
  io.stdout(`${task.task_id}  ${task.status}  session ${task.session_id}  ${task.created_at}\n`);
  io.stdout(`goal: ${task.goal}\n`);
  const progress = createProgress({
    write: io.stdout,
    style,
    live: false,
    now: Date.now,
    setInterval: () => undefined,
    clearInterval: () => {},
  });
  for (const e of task.events) progress.onEvent(e);
  if (task.final_answer) io.stdout(`answer: ${task.final_answer}\n`);
  if (!isLive(task.status)) {
    const { events: _events, ...rest } = task;
    const durationMs = task.finished_at
      ? Date.parse(task.finished_at) - Date.parse(task.created_at)
      : undefined;
    io.stdout(
      summary(
        {
          ...rest,
          status: task.status,
          tokens: task.tokens ?? undefined,
          error: task.error ?? undefined,
          duration_ms: durationMs,
        },
        style,
      ),
    );
  }
  return EXIT.ok;
}
