import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LEARNING } from '../../../mcp-gateway/catalog/learned.ts';
import type { AuditActor } from '../../../mcp-gateway/store/audit.ts';
import type { GatewayState } from '../../../mcp-gateway/store/interface.ts';
import { openGatewayState } from '../../../mcp-gateway/store/store.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// Discovery's learned keywords on the real audit rows, on both databases: a LIST query, then the toolset
// activated and one of its tools called in the same task, credits the query's words to the toolset; a term
// ranks once two tasks credited it; credits decay; two replicas' passes never count a credit twice.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const backends = [
  {
    name: 'SQLite',
    async at() {
      const dir = await mkdtemp(path.join(tmpdir(), 'gateway-learned-'));
      dirs.push(dir);
      return { file: path.join(dir, 'gateway.db') };
    },
  },
  { name: 'PostgreSQL', at: async () => ({ databaseUrl: await freshDatabase('learned') }) },
];

const owner = (tool: string) => ({ send_mail: 'mail', create_issue: 'tracker' })[tool];
/** Past the minute rows wait before a pass reads them. */
const later = () => Date.now() + 2 * 60_000;
const DAY = 86_400_000;

/** One task's LIST, activation and successful call, as the gateway audits them. */
function task(state: GatewayState, taskId: string, query: string, forUser?: string) {
  const [toolset, tool] = ['mail', 'send_mail'];
  const actor: AuditActor = { actor: `model in task ${taskId}`, task_id: taskId, for_user: forUser };
  const session = `ses_${taskId}`;
  state.store.audit({ session_id: session, kind: 'list', subject: query, ok: true }, actor);
  state.store.audit({ session_id: session, kind: 'activate', subject: toolset, ok: true }, actor);
  state.store.audit({ session_id: session, kind: 'call', subject: tool, ok: true }, actor);
}

describe.each(backends)('learned keywords on $name', (backend) => {
  it('ranks a query’s words for the toolset used only once two tasks taught them', async () => {
    const state = await openGatewayState(await backend.at());
    try {
      task(state, 't1', 'post a letter');
      await state.store.flush();
      // Rows younger than a minute wait for the next pass.
      expect(await state.store.learnFromAudit(Date.now(), owner)).toEqual({ rows: 0, credits: 0 });
      expect(await state.store.learnFromAudit(later(), owner)).toEqual({ rows: 3, credits: 1 });
      expect(await state.store.learnedKeywords(later())).toEqual(new Map());
      // A failed call, or a call of another toolset's tool, teaches nothing.
      const actor = { actor: 'model in task t2', task_id: 't2' };
      state.store.audit({ session_id: 's', kind: 'list', subject: 'post a letter', ok: true }, actor);
      state.store.audit({ session_id: 's', kind: 'activate', subject: 'mail', ok: true }, actor);
      state.store.audit({ session_id: 's', kind: 'call', subject: 'send_mail', ok: false }, actor);
      state.store.audit({ session_id: 's', kind: 'call', subject: 'create_issue', ok: true }, actor);
      await state.store.flush();
      expect((await state.store.learnFromAudit(later(), owner)).credits).toBe(0);
      expect(await state.store.learnedKeywords(later())).toEqual(new Map());
      // Its call, in a later pass than its LIST and activation, credits the task then.
      state.store.audit({ session_id: 's', kind: 'call', subject: 'send_mail', ok: true }, actor);
      await state.store.flush();
      expect((await state.store.learnFromAudit(later(), owner)).credits).toBe(1);
      const now = later();
      expect(await state.store.learnedKeywords(now)).toEqual(new Map([['mail', ['letter', 'post']]]));
      // Two credits fade below use after two half-lives' worth of a month; retention deletes what faded.
      expect(await state.store.learnedKeywords(now + 29 * DAY)).toEqual(
        new Map([['mail', ['letter', 'post']]]),
      );
      expect(await state.store.learnedKeywords(now + 31 * DAY)).toEqual(new Map());
      expect(await state.store.pruneLearned(now + 1)).toBe(2);
    } finally {
      await state.close();
    }
  });

  it('a task without a task id is its session; a task repeating itself counts once', async () => {
    const state = await openGatewayState(await backend.at());
    try {
      const mcp = { actor: 'mcp' };
      for (const session of ['a', 'b']) {
        state.store.audit({ session_id: session, kind: 'list', subject: 'open a ticket', ok: true }, mcp);
        state.store.audit({ session_id: session, kind: 'activate', subject: 'tracker,mail', ok: true }, mcp);
        state.store.audit({ session_id: session, kind: 'call', subject: 'create_issue', ok: true }, mcp);
      }
      // One hostile task repeating a query ten times plants nothing.
      for (let i = 0; i < 10; i++) task(state, 'hostile', 'wipe the disk');
      await state.store.flush();
      expect((await state.store.learnFromAudit(later(), owner)).credits).toBe(3);
      expect(await state.store.learnedKeywords(later())).toEqual(new Map([['tracker', ['open', 'ticket']]]));
    } finally {
      await state.close();
    }
  });

  it('one user’s tasks alone plant nothing, however many; a second user’s make the words count', async () => {
    const state = await openGatewayState(await backend.at());
    try {
      for (let i = 0; i < 5; i++) task(state, `m${i}`, 'wipe the disk', 'user:mallory');
      await state.store.flush();
      expect((await state.store.learnFromAudit(later(), owner)).credits).toBe(5);
      expect(await state.store.learnedKeywords(later())).toEqual(new Map());
      task(state, 'a1', 'wipe the disk', 'user:ann');
      await state.store.flush();
      await state.store.learnFromAudit(later(), owner);
      expect(await state.store.learnedKeywords(later())).toEqual(new Map([['mail', ['disk', 'wipe']]]));
    } finally {
      await state.close();
    }
  });

  it('one user’s many words cannot push out what two users taught', async () => {
    const state = await openGatewayState(await backend.at());
    try {
      for (let i = 0; i < 3; i++) task(state, `a${i}`, 'post a letter', 'user:alice');
      for (let i = 0; i < 3; i++) task(state, `b${i}`, 'post a letter', 'user:bob');
      const junk = Array.from({ length: 48 }, (_, i) => `zq${String.fromCharCode(97 + (i % 26))}${i}x`);
      for (let i = 0; i < 40; i++)
        task(state, `m${i}`, junk.slice((i % 4) * 12, (i % 4) * 12 + 12).join(' '), 'user:mallory');
      await state.store.flush();
      await state.store.learnFromAudit(later(), owner);
      expect(await state.store.learnedKeywords(later())).toEqual(new Map([['mail', ['letter', 'post']]]));
    } finally {
      await state.close();
    }
  });

  it('two replicas passing over the same rows at once credit each task once', async () => {
    const at = await backend.at();
    const [a, b] = [await openGatewayState(at), await openGatewayState(at)];
    try {
      task(a, 't1', 'post a letter');
      await a.store.flush();
      const now = later();
      const passes = await Promise.allSettled([
        a.store.learnFromAudit(now, owner),
        b.store.learnFromAudit(now, owner),
      ]);
      const credits = passes.map((p) => (p.status === 'fulfilled' ? p.value.credits : 0));
      expect(credits.reduce((x, y) => x + y, 0)).toBe(1);
      expect((await b.store.learnFromAudit(now, owner)).credits).toBe(0);
      // Counted twice, the one task would rank its words.
      expect(await b.store.learnedKeywords(now)).toEqual(new Map());
      task(b, 't2', 'post a letter');
      await b.store.flush();
      expect((await a.store.learnFromAudit(later(), owner)).credits).toBe(1);
      expect(await b.store.learnedKeywords(later())).toEqual(new Map([['mail', ['letter', 'post']]]));
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('keeps at most LEARNING.termsPerToolset terms per toolset, the strongest', async () => {
    const state = await openGatewayState(await backend.at());
    try {
      // 60 distinct words, each taught by two tasks; the first ones again, so they are the strongest.
      const words = Array.from({ length: 60 }, (_, i) => `zq${i.toString(36)}x`);
      let n = 0;
      for (const word of [...words, ...words, ...words.slice(0, 5)]) task(state, `t${n++}`, word);
      await state.store.flush();
      expect((await state.store.learnFromAudit(later(), owner)).credits).toBe(125);
      const ranked = (await state.store.learnedKeywords(later())).get('mail') ?? [];
      expect(ranked).toHaveLength(LEARNING.termsPerToolset);
      expect(ranked.slice(0, 5).sort()).toEqual(words.slice(0, 5).sort());
      // What fell out is not kept: a table of at most 40 rows per toolset.
      expect(await state.store.pruneLearned(later() + 1)).toBe(LEARNING.termsPerToolset);
    } finally {
      await state.close();
    }
  });
});
