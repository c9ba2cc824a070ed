import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import { withActor } from '../../../mcp-gateway/audit-context.ts';
import { normalizeTerm } from '../../../mcp-gateway/catalog/search.ts';
import { learning } from '../../../mcp-gateway/server.ts';
import { startLearner } from '../../../mcp-gateway/store/learned-keywords.ts';
import { log, makeStack } from '../../helpers/stack.ts';

// Discovery that learns from use, through the gateway: a task's manage_toolsets LIST is audited, and once two
// tasks found a toolset with a phrasing its files do not hold, LIST ranks it first for that phrasing, without
// ever showing the learned words to the model. DISCOVERY_LEARNING=false starts no learner.

/** The shipped toolset files named. */
const files = (names: string[]) =>
  Object.fromEntries(names.map((n) => [`${n}.yaml`, readFileSync(`toolsets/${n}.yaml`, 'utf8')] as const));

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

describe('discovery learning through the gateway', () => {
  it('audits a LIST, learns from two tasks, ranks the taught phrasing first and never shows it', async () => {
    const stack = await makeStack({ toolsets: files(['file_system_tools', 'database_tools', 'git_tools']) });
    close = () => stack.close();
    const { gateway } = stack;
    const taught = 'tidy the zorblat quarterly';
    const before = (await gateway.listToolsets('probe', 'zorblat')).toolsets.map((t) => t.id);
    for (const task of ['t1', 't2']) {
      await withActor({ actor: `model in task ${task}`, task_id: task }, async () => {
        // A LIST without a query asks for nothing: it is not audited.
        await gateway.manageToolsets(`ses_${task}`, { action: 'LIST' });
        await gateway.manageToolsets(`ses_${task}`, { action: 'LIST', query: taught });
        await gateway.manageToolsets(`ses_${task}`, {
          action: 'ACTIVATE',
          toolset_ids: ['file_system_tools'],
        });
        const result = await gateway.callTool(`ses_${task}`, 'list_allowed_directories', {});
        expect(result.success).toBe(true);
      });
    }
    await stack.gatewayStore.flush();
    const listed = (await stack.gatewayStore.listAudit({ limit: 10, kind: 'list' })).audit;
    expect(listed.map((r) => [r.task_id, r.subject, r.ok])).toEqual([
      ['t2', taught, true],
      ['t1', taught, true],
    ]);
    const learner = startLearner({
      store: stack.gatewayStore,
      toolsetOf: (tool) => stack.catalog.tools.get(tool)?.toolset,
      apply: (learned) => stack.catalog.setLearned(learned),
      log,
      // Past the minute the learner leaves rows to settle.
      now: () => Date.now() + 120_000,
    });
    await learner.runOnce();
    await learner.stop();

    const res = await gateway.manageToolsets('probe', { action: 'LIST', query: 'zorblat' });
    const ids = (res.result.toolsets as { id: string }[]).map((t) => t.id);
    expect(before).not.toContain('file_system_tools');
    expect(ids[0]).toBe('file_system_tools');
    // Ids, descriptions and tools only: the learned words are nowhere in what the model reads.
    const shown = JSON.stringify(res.result).toLowerCase();
    for (const word of ['zorblat', 'quarterly', 'tidy']) {
      expect(shown).not.toContain(word);
      expect(shown).not.toContain(normalizeTerm(word));
    }
  });

  it('DISCOVERY_LEARNING=false starts no learner; on, it does', async () => {
    const stack = await makeStack({ toolsets: files(['file_system_tools']) });
    close = () => stack.close();
    const off = loadConfig({ DISCOVERY_LEARNING: 'false' });
    expect(off.gateway.discoveryLearning).toBe(false);
    expect(learning(off, stack.catalog, stack.gatewayStore, log)).toBeUndefined();
    const on = learning(loadConfig({}), stack.catalog, stack.gatewayStore, log);
    expect(on).toBeDefined();
    await on?.stop();
    expect(() => loadConfig({ DISCOVERY_LEARNING: 'sometimes' })).toThrow(/DISCOVERY_LEARNING/);
  });
});
