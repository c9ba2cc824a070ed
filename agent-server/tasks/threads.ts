import { randomUUID } from 'node:crypto';
import { HttpError } from '../../lib/http/http.ts';
import type { ExecuteTaskRequest, Thread, Webhook } from '../contract.ts';
import type { ThreadInput } from '../loop/loop.ts';
import type { Transcript } from '../loop/state.ts';
import type { StoredThread, TaskStore, TaskThread } from '../store/interface.ts';

// Which thread a new task is a turn of: the one it names (its owner's only), or one made with it; and what
// happens when that thread's last task has not ended (if_busy).

/** Who a request acts as: the credential that owns what it makes, and whether it sees everyone's (operator). */
export interface Caller {
  owner: string;
  all: boolean;
}

/** A thread's title from its first goal. */
export const titleOf = (goal: string) => (goal.length <= 200 ? goal : `${goal.slice(0, 199)}…`);

/** A thread as the API shows it. */
export const threadView = ({ owner: _o, ...t }: StoredThread): Thread => t;

/** The thread `threadId` as `caller` may see it: another credential's is not there (404, as a missing one). */
export async function visibleThread(
  store: TaskStore,
  threadId: string,
  caller: Caller,
): Promise<StoredThread> {
  const thread = await store.getThread(threadId);
  if (!thread || (!caller.all && thread.owner !== caller.owner))
    throw new HttpError(404, `No thread ${threadId}; GET /agent/threads lists yours`);
  return thread;
}

/**
 * Refuses a session another owner's threads act in: a new thread of `caller` may name a session of their own
 * threads, or a new one, never another's (its toolsets, its approvals and its pending calls are that owner's).
 */
export async function checkSession(store: TaskStore, sessionId: string, caller: Caller): Promise<void> {
  if (caller.all) return;
  const owners = await store.sessionOwners(sessionId);
  if (owners.some((o) => o !== caller.owner)) {
    throw new HttpError(
      409,
      `session_id ${sessionId} is not one of your threads' sessions: continue one of your threads ` +
        '(thread_id), or leave session_id out for a new session',
    );
  }
}

/** The owner of a task's thread (undefined: no such task, or one recorded before threads). */
export async function ownerOfTask(store: TaskStore, taskId: string): Promise<string | undefined> {
  const task = await store.getTask(taskId);
  return task?.thread_id ? (await store.getThread(task.thread_id))?.owner : undefined;
}

/** Of `approvals`, those of tasks whose owner is in `visible` (undefined: all of them). */
export async function approvalsInSight<A extends { task_id: string }>(
  store: TaskStore,
  approvals: A[],
  visible: readonly string[] | undefined,
): Promise<A[]> {
  if (!visible) return approvals;
  const owners = new Map<string, string>();
  for (const a of approvals) owners.set(a.task_id, (await ownerOfTask(store, a.task_id)) ?? '');
  return approvals.filter((a) => visible.includes(owners.get(a.task_id) ?? ''));
}

/** What a new task gets from its thread: the thread, the session it acts in, the webhook its end goes to. */
export interface TaskThreadPlan {
  thread: TaskThread;
  sessionId: string;
  webhook?: Webhook;
  /** The thread has a task that has not ended: the new one waits for it (queued). */
  busy: boolean;
}

/**
 * The thread of a new task. A named thread must be the caller's; its session is the task's (a different
 * `session_id` is refused). When a task of it has not ended, `if_busy` says what happens: wait (the default),
 * refuse, or cancel it (`cancel`, which resolves false when it does not run in this process).
 */
export async function planThread(
  store: TaskStore,
  req: ExecuteTaskRequest,
  goal: string,
  caller: Caller,
  cancel: (taskId: string) => Promise<boolean>,
): Promise<TaskThreadPlan> {
  const { webhook } = req;
  if (req.thread_id === undefined) {
    if (req.session_id !== undefined) await checkSession(store, req.session_id, caller);
    const made = { owner: caller.owner, title: titleOf(goal), webhook: webhook ?? null };
    return {
      thread: { id: `thr_${randomUUID()}`, made },
      sessionId: req.session_id ?? `ses_${randomUUID()}`,
      ...(webhook ? { webhook } : {}),
      busy: false,
    };
  }
  const thread = await visibleThread(store, req.thread_id, caller);
  if (req.session_id !== undefined && req.session_id !== thread.session_id) {
    throw new HttpError(
      400,
      `Invalid request body: session_id ${req.session_id} is not the session of thread ${thread.thread_id} ` +
        `(${thread.session_id}); a thread's tasks act in its session: leave session_id out`,
    );
  }
  const hook = webhook ?? thread.webhook ?? undefined;
  const plan = {
    thread: { id: thread.thread_id },
    sessionId: thread.session_id,
    ...(hook ? { webhook: hook } : {}),
  };
  const busy = await whenBusy(store, thread.thread_id, req.if_busy ?? 'enqueue', cancel);
  return { ...plan, busy };
}

/** Whether the thread still has a task not ended once `ifBusy` is applied (reject and interrupt act here). */
async function whenBusy(
  store: TaskStore,
  threadId: string,
  ifBusy: NonNullable<ExecuteTaskRequest['if_busy']>,
  cancel: (taskId: string) => Promise<boolean>,
): Promise<boolean> {
  let active = await store.activeTurn(threadId);
  if (!active) return false;
  if (ifBusy === 'enqueue') return true;
  if (ifBusy === 'reject') {
    throw new HttpError(
      409,
      `Thread ${threadId} has a task that has not ended: ${active.task_id} (${active.status}); send ` +
        'if_busy "enqueue" to wait for it, or "interrupt" to cancel it and go on from what it had done',
      { task_id: active.task_id },
    );
  }
  // Interrupt: every turn not ended is cancelled, oldest first, each once; the new one goes on from what they did.
  const asked = new Set<string>();
  while (active) {
    if (asked.has(active.task_id) || !(await cancel(active.task_id))) {
      throw new HttpError(
        409,
        asked.has(active.task_id)
          ? `Task ${active.task_id} of thread ${threadId} was cancelled but has not stopped yet; send if_busy ` +
              '"enqueue" to wait for it'
          : `Task ${active.task_id} of thread ${threadId} (${active.status}) runs in another agent-server ` +
              'process and cannot be interrupted from this one; send if_busy "enqueue" to wait for it',
        { task_id: active.task_id },
      );
    }
    asked.add(active.task_id);
    active = await store.activeTurn(threadId);
  }
  return active !== undefined;
}

/** A thread's earlier turns as its next task's loop gets them: the conversation, its exposure, its compaction. */
export async function threadInput(store: TaskStore, threadId: string): Promise<ThreadInput> {
  const transcripts = await store.threadTranscripts(threadId);
  const messages: ThreadInput['messages'] = [];
  let exposure: ThreadInput['exposure'];
  let shown: string[] = [];
  let context: ThreadInput['context'] = {};
  for (const { transcript } of transcripts) {
    const t = transcript as Partial<Transcript> | null;
    if (!t?.messages?.length) continue;
    messages.push(...t.messages);
    exposure ??= t.exposure;
    shown = t.shown ?? shown;
    // Each turn's transcript says how the compaction stood after it: the last one's is the thread's.
    context = t.context ?? context;
  }
  return { messages, shown, ...(exposure ? { exposure } : {}), context };
}

/** A thread with its last `limit` turns and how its compaction stands (from its last turn's transcript). */
export async function threadDetail(store: TaskStore, thread: StoredThread, limit: number) {
  const [{ turns, total }, last] = await Promise.all([
    store.threadTurns(thread.thread_id, limit),
    store.lastTranscript(thread.thread_id),
  ]);
  const context = (last as Partial<Transcript> | null)?.context;
  return {
    ...threadView(thread),
    turns,
    turns_total: total,
    compaction: {
      summarised_messages: context?.summarised ?? 0,
      stubbed_results: context?.stubbed?.length ?? 0,
    },
  };
}
