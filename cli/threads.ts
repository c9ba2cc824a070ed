import { agentRoutes } from '../agent-server/contract.ts';
import { callRoute, type ServiceEndpoint, ServiceError } from '../lib/http/http-client.ts';
import { type CliIo, EXIT, UsageError } from './io.ts';
import { age } from './render.ts';
import { continueLine } from './run.ts';

// `toolshift threads`: the caller's conversations, one with its turns, and deleting one.

/** The flags `threads` reads. */
export interface ThreadsFlags {
  json: boolean;
  limit: number;
}

/** Runs `toolshift threads …`; resolves to the exit code. */
export async function threadsCommand(
  args: string[],
  flags: ThreadsFlags,
  agent: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  try {
    return await threads(args, flags, agent, io);
  } catch (err) {
    // The server's 404 names its HTTP route; a CLI user is told the command instead.
    if (err instanceof ServiceError && err.status === 404 && args[1]) {
      throw new Error(`no thread ${args[1]}; toolshift threads lists yours`);
    }
    throw err;
  }
}

async function threads(
  args: string[],
  flags: ThreadsFlags,
  agent: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const [sub = 'list', id, ...extra] = args;
  if (extra.length > 0) throw new UsageError(`threads ${sub} takes one thread id`, 'threads');
  const needId = () => {
    if (!id)
      throw new UsageError(`threads ${sub} needs a thread id (toolshift threads lists them)`, 'threads');
    return id;
  };
  switch (sub) {
    case 'list':
      return listThreads(flags, agent, io);
    case 'show':
      return showThread(needId(), flags, agent, io);
    case 'delete': {
      const gone = await callRoute(agent, agentRoutes.deleteThread, { params: { id: needId() } });
      if (flags.json) io.stdout(`${JSON.stringify(gone)}\n`);
      else {
        const n = gone.deleted_tasks;
        io.stdout(`deleted thread ${gone.thread_id} and its ${n} task${n === 1 ? '' : 's'}\n`);
      }
      return EXIT.ok;
    }
    default:
      throw new UsageError(`unknown threads command "${sub}"; use list, show or delete`, 'threads');
  }
}

/** `threads list`: the most recently continued threads, a row each. */
async function listThreads(flags: ThreadsFlags, agent: ServiceEndpoint, io: CliIo): Promise<number> {
  const { threads } = await callRoute(agent, agentRoutes.listThreads, {
    query: { limit: String(flags.limit) },
  });
  if (flags.json) {
    io.stdout(`${JSON.stringify(threads)}\n`);
    return EXIT.ok;
  }
  if (threads.length === 0) {
    io.stdout('no threads yet: start one with toolshift chat, or toolshift run "<goal>"\n');
    return EXIT.ok;
  }
  const now = (io.now ?? Date.now)();
  const idWidth = Math.max(6, ...threads.map((t) => t.thread_id.length));
  const row = (id: string, when: string, title: string) =>
    `${id.padEnd(idWidth)}  ${when.padEnd(8)} ${title}\n`;
  io.stdout(row('THREAD', 'UPDATED', 'TITLE'));
  for (const t of threads) io.stdout(row(t.thread_id, age(t.updated_at, now), oneLine(t.title, 70)));
  return EXIT.ok;
}

/** `threads show ID`: the thread's turns, oldest first: goal, status, answer (or error) and task. */
async function showThread(
  id: string,
  flags: ThreadsFlags,
  agent: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const thread = await callRoute(agent, agentRoutes.getThread, { params: { id } });
  if (flags.json) {
    io.stdout(`${JSON.stringify(thread)}\n`);
    return EXIT.ok;
  }
  const { turns, compaction } = thread;
  io.stdout(`${thread.thread_id}  session ${thread.session_id}  ${thread.created_at}\n`);
  io.stdout(`title: ${thread.title}\n`);
  io.stdout(`${turns.length} turn${turns.length === 1 ? '' : 's'}`);
  io.stdout(
    compaction.stubbed_results + compaction.summarised_messages > 0
      ? ` · compacted: ${compaction.stubbed_results} results moved out, ${compaction.summarised_messages} messages summarised\n`
      : '\n',
  );
  turns.forEach((t, i) => {
    io.stdout(`\n${i + 1}. ${t.status}  task ${t.task_id}  ${t.created_at}\n`);
    io.stdout(`   goal: ${oneLine(t.goal, 200)}\n`);
    if (t.final_answer) io.stdout(`   answer: ${t.final_answer.replace(/\n/g, '\n           ')}\n`);
    if (t.error) io.stdout(`   error: ${t.error}\n`);
  });
  io.stdout(`\n${continueLine(thread.thread_id).trimStart()}`);
  return EXIT.ok;
}

/** `text` on one line, cut to `max` characters. */
function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
