import { agentRoutes, type ToolExposure } from '../agent-server/contract.ts';
import { callRoute, type ServiceEndpoint } from '../lib/http/http-client.ts';
import { LIMITS } from '../lib/http/limits.ts';
import { gatewayRoutes } from '../mcp-gateway/contract.ts';
import { type CliIo, EXIT, rootCause, UsageError } from './io.ts';
import { continueLine, submitWhenRoom } from './run.ts';
import { colourWanted, createStyle, type Style } from './style.ts';
import { watchTask } from './watch.ts';

// `toolshift chat`: a conversation on a thread, a line a turn. Each turn is followed as `run` follows a task
// (watchTask: the answer streaming, approvals asked), except that Ctrl-C cancels the turn and not the chat.

/** The flags `chat` reads. */
export interface ChatFlags {
  /** Continue this thread (a new one from the first line when absent). */
  thread?: string;
  /** The session new threads act in (their active toolsets). */
  session?: string;
  exposure?: ToolExposure;
  approvals: 'ask' | 'approve' | 'deny';
}

/** The slash commands and what each does, as /help lists them. */
const SLASH: Record<string, string> = {
  '/new': 'a new thread from the next line',
  '/thread': "this thread's id, and how to continue it elsewhere",
  '/toolsets': "the toolsets active in this thread's session",
  '/help': 'these commands',
  '/exit': 'leave the chat (Ctrl-D or Ctrl-C on an empty line too)',
};

/** What one chat holds: where it talks, and the thread it is on. */
interface Chat {
  agent: ServiceEndpoint;
  gateway: ServiceEndpoint;
  flags: ChatFlags;
  io: CliIo;
  style: Style;
  thread?: string;
  /** The session of the thread, once known. */
  session?: string;
}

/** Runs `toolshift chat` until its input ends or /exit; resolves to the exit code. */
export async function chatCommand(
  args: string[],
  flags: ChatFlags,
  endpoints: { agent: ServiceEndpoint; gateway: ServiceEndpoint },
  io: CliIo,
): Promise<number> {
  if (args.length > 0) {
    throw new UsageError(
      'chat takes no goal: type each at its prompt (or pipe them in, a line each)',
      'chat',
    );
  }
  if (!io.openPrompt)
    throw new UsageError('chat reads its lines from stdin, which is not available here', 'chat');
  const style = createStyle(colourWanted(io.stderrIsTTY, io.env));
  const chat: Chat = { ...endpoints, flags, io, style, thread: flags.thread };
  if (io.stdinIsTTY) {
    io.stderr(
      style.dim(
        `${chat.thread ? `continuing thread ${chat.thread}` : 'a new thread starts with your first line'}; ` +
          '/help lists the commands, Ctrl-C cancels a turn, Ctrl-D leaves\n',
      ),
    );
  }
  const prompt = io.openPrompt();
  try {
    for (;;) {
      const line = await prompt.next(io.stdinIsTTY ? style.bold('> ') : '');
      if (line === undefined) return EXIT.ok;
      const text = line.trim();
      if (text === '') continue;
      if (text.startsWith('/')) {
        if (await slashCommand(chat, text)) return EXIT.ok;
        continue;
      }
      await turn(chat, text).catch((err: unknown) => {
        io.stderr(style.red(`error: ${(rootCause(err) as Error).message}\n`));
      });
    }
  } finally {
    prompt.close();
  }
}

/** Sends `goal` to the chat's thread (a new one the first time) and follows the task to its end. */
async function turn(chat: Chat, goal: string): Promise<void> {
  const { agent, flags, io, style } = chat;
  if (goal.length > LIMITS.goal) {
    io.stderr(
      style.red(`not sent: a goal is at most ${LIMITS.goal} characters, and that line has ${goal.length}\n`),
    );
    return;
  }
  const accepted = await submitWhenRoom(agent, io, {
    body: {
      goal,
      ...(chat.thread ? { thread_id: chat.thread } : { session_id: flags.session }),
      exposure: flags.exposure,
      wait: false,
    },
  });
  if (accepted.thread_id !== chat.thread && io.stdinIsTTY) {
    io.stderr(style.dim(`thread ${accepted.thread_id} (/thread tells how to continue it elsewhere)\n`));
  }
  chat.thread = accepted.thread_id;
  chat.session = accepted.session_id;
  await watchTask(
    agent,
    accepted.task_id,
    { json: false, quiet: false, cancelOnInterrupt: true, approvals: flags.approvals },
    io,
  );
}

/** Runs a slash command; true when it ends the chat. */
async function slashCommand(chat: Chat, text: string): Promise<boolean> {
  const { io, style } = chat;
  const [name] = text.split(/\s+/);
  switch (name) {
    case '/exit':
      return true;
    case '/new':
      chat.thread = undefined;
      chat.session = undefined;
      io.stderr('a new thread starts with your next line\n');
      return false;
    case '/thread':
      io.stderr(
        chat.thread
          ? `thread ${chat.thread}\n  continue it here: toolshift chat --thread ${chat.thread}\n${continueLine(chat.thread)}`
          : 'no thread yet: your next line starts one\n',
      );
      return false;
    case '/toolsets':
      await activeToolsets(chat).catch((err: unknown) => {
        io.stderr(style.red(`error: ${(rootCause(err) as Error).message}\n`));
      });
      return false;
    case '/help':
      for (const [command, what] of Object.entries(SLASH)) io.stderr(`  ${command.padEnd(10)} ${what}\n`);
      return false;
    default:
      io.stderr(`unknown command ${name.slice(0, 40)}; the commands are ${Object.keys(SLASH).join(', ')}\n`);
      return false;
  }
}

/** `/toolsets`: the toolsets active in the thread's session, as the gateway has them. */
async function activeToolsets(chat: Chat): Promise<void> {
  const { agent, gateway, io } = chat;
  if (chat.thread && !chat.session) {
    const thread = await callRoute(agent, agentRoutes.getThread, { params: { id: chat.thread } });
    chat.session = thread.session_id;
  }
  const session = chat.session ?? chat.flags.session;
  if (!session) {
    io.stderr('no thread yet: it starts with your default toolsets (toolshift toolsets lists them)\n');
    return;
  }
  const { toolsets } = await callRoute(gateway, gatewayRoutes.listToolsets, {
    query: { session_id: session },
  });
  const active = toolsets.filter((t) => t.active).map((t) => t.id);
  io.stderr(`active in session ${session}: ${active.length > 0 ? active.join(', ') : 'none'}\n`);
}
