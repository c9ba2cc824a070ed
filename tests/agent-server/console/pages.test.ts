import { describe, expect, it } from 'vitest';
import { approvalCard, approvalsPage } from '../../../agent-server/console/approvals-page.ts';
import { auditPage } from '../../../agent-server/console/audit-page.ts';
import { overviewPage, taskPage } from '../../../agent-server/console/pages.ts';
import { PEOPLE_SHOWN, peoplePage } from '../../../agent-server/console/people-page.ts';
import { threadPage, threadsPage } from '../../../agent-server/console/threads-page.ts';
import { toolsetsPage } from '../../../agent-server/console/toolsets-page.ts';
import { definitionDiff } from '../../../mcp-gateway/catalog/pins.ts';

// What a hostile model or upstream can put into a page: text, never markup or another route.

const can = { run: true, decide: true, operate: true };

describe('console pages', () => {
  it('escape what a model wrote, and aim a decision at its own route whatever the call id says', async () => {
    const page = String(
      await approvalCard(
        {
          task_id: 'task_1',
          call_id: '../../../../console/actions/reload',
          approval_id: 'apr_1',
          kind: 'call',
          subject: '<img src=x onerror=alert(1)>',
          arguments: { path: '"><script>alert(2)</script>' },
          reason: '<b>policy</b>',
          expires_at: '2026-11-26T00:00:00Z',
        },
        can,
      ),
    );
    expect(page).toContain(
      'data-decide="/agent/tasks/task_1/approvals/..%2F..%2F..%2F..%2Fconsole%2Factions%2Freload"',
    );
    expect(page).not.toContain('<img');
    expect(page).not.toContain('<script');
    expect(page).not.toContain('<b>');
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;');
  });

  it('say an upstream server not started yet has no known tools or cost, not zero; a withheld diff is escaped', async () => {
    // A name an upstream chose to forge diff lines: a line break, then lines that look removed and added.
    const hostileName = 'transfer\n-  "description": "evil"\n+  "description": "benign"';
    const base = { enabled: true, active: false, default: false };
    const page = String(
      await toolsetsPage(
        [
          {
            ...base,
            id: 'files',
            description: 'Files.',
            tools: ['read'],
            backend: 'tool-server',
            definition_tokens: 40,
          },
          { ...base, id: 'memory', description: 'Memory.', tools: [], backend: { mcp: {} }, health: 'idle' },
          {
            ...base,
            id: 'bank',
            description: 'Bank.',
            tools: ['lookup'],
            health: 'up',
            definition_tokens: 35,
            withheld: [
              {
                name: hostileName,
                status: 'changed',
                hash: 'h1',
                definition: {},
                diff: definitionDiff(
                  { name: hostileName, description: 'a', inputSchema: {} },
                  {
                    name: hostileName,
                    description: '<script>x</script> pay \u202Eevil\u202C',
                    inputSchema: {},
                  },
                ),
              },
            ],
          },
          // A running server whose every tool is withheld: it offers none now (0), and that is known.
          { ...base, id: 'vault', description: 'Vault.', tools: [], health: 'up' },
        ],
        can,
      ),
    );
    const row = (id: string) =>
      page.slice(
        page.indexOf(`data-toolset="${id}"`),
        page.indexOf('</tr>', page.indexOf(`data-toolset="${id}"`)),
      );
    expect(row('files')).toMatch(/<td class="num">1<\/td>\s*<td class="num">40<\/td>/);
    expect(row('memory')).not.toMatch(/<td class="num">0<\/td>/);
    expect(row('memory').match(/listed when its server first starts/g)).toHaveLength(2);
    expect(page).toMatch(
      /would cost\s+at least 75 tokens of tool definitions per model request \(not counted yet: memory, whose/,
    );
    expect(row('vault')).toMatch(/<td class="num">0<\/td>\s*<td class="num">0<\/td>/);
    expect(page).not.toMatch(/not counted yet: [^)]*vault/);
    // The withheld change: open, lines marked, its text escaped, the separator rule left out; the upstream's
    // name cannot add diff lines of its own, and text-direction characters are shown, not obeyed.
    expect(page).toContain('<details open>');
    expect(page).toContain(
      '<ins>+  &quot;description&quot;: &quot;&lt;script&gt;x&lt;/script&gt; pay \\u{202e}evil\\u{202c}&quot;,</ins>',
    );
    expect(page).toContain('<del>-  &quot;description&quot;: &quot;a&quot;,</del>');
    expect(page).not.toContain('===');
    expect(page.match(/<del>/g)).toHaveLength(1);
    expect(page.match(/<ins>/g)).toHaveLength(1);
    expect(page).not.toContain('\u202e');
  });

  it('list the contract’s event names for the live view', async () => {
    const page = String(
      await taskPage(
        {
          task_id: 'task_1',
          session_id: 'ses_1',
          thread_id: null,
          goal: '</section><script>x</script>',
          status: 'running',
          final_answer: null,
          error: null,
          steps: 0,
          usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
          toolsets_used: [],
          tokens: null,
          created_at: '2026-11-26T00:00:00Z',
          finished_at: null,
        },
        can,
      ),
    );
    expect(page).toMatch(/data-event-types="task_started model_request .*task_finished"/);
    expect(page).toMatch(/data-event-types="[^"]* consent_required /);
    expect(page).not.toContain('<script>');
  });

  it('count the tasks waiting for a person to connect their account beside those waiting for a decision', async () => {
    const page = String(
      await overviewPage({
        services: [],
        counts: { awaiting_approval: 2, awaiting_consent: 3 },
        approvals: 2,
        failures: [],
        upstreams: [],
      }),
    );
    expect(page).toContain('href="/console/tasks?status=awaiting_consent"');
    expect(page).toMatch(/data-count="awaiting_consent">3</);
    expect(page).toMatch(/data-count="awaiting_approval">2</);
  });

  it("show a toolset's tools with descriptions and schemas (escaped), count only enabled toolsets, and ask before a disable", async () => {
    const base = { active: false, default: false, backend: 'tool-server' };
    const page = String(
      await toolsetsPage(
        [
          {
            ...base,
            id: 'files',
            description: 'Files.',
            tools: ['read'],
            enabled: true,
            definition_tokens: 1234,
          },
          {
            ...base,
            id: 'web',
            description: 'Web.',
            tools: ['fetch'],
            enabled: false,
            definition_tokens: 500,
          },
        ],
        can,
        {
          files: [
            {
              name: 'read',
              description: 'Read a file <b>now</b>',
              parameters: { type: 'object', properties: { path: { type: 'string' } } },
              annotations: {},
              toolset: 'files',
            },
          ],
        },
      ),
    );
    // Only the enabled toolset counts toward what all of them at once would cost; numbers are grouped.
    expect(page).toMatch(/2 toolsets, 1 enabled; all the enabled ones at once would cost\s+1,234 tokens/);
    expect(page).toContain('data-total="1234"');
    expect(page).toContain('<td class="num">1,234</td>');
    const tools = page.slice(page.indexOf('data-tools="files"'), page.indexOf('</details>\n  </details>'));
    expect(tools).toContain('<code>read</code>');
    expect(tools).toContain('Read a file &lt;b&gt;now&lt;/b&gt;');
    expect(tools).toContain('&quot;path&quot;: {');
    // A built-in toolset's health is the tool-server's: no "native" tag.
    expect(page).not.toContain('native');
    expect(page).toContain('built in');
    // Disable asks first and is not the page's primary button; Enable does not ask.
    expect(page).toMatch(
      /class="secondary danger"[^>]*data-confirm="Disable files for everyone\? Tasks and MCP clients lose its 1 tool until/,
    );
    expect(page).toMatch(/<button type="button" class=""[^>]*data-confirm=""[^>]*>Enable<\/button>/);
  });

  it('write audit rows to fit one line each: the model without its task id, asks as asks, reloads in words', async () => {
    const row = { session_id: 's1', toolset: null, tool: null };
    const page = String(
      await auditPage(
        [
          {
            ...row,
            id: 1,
            at: '2026-11-28T14:01:37.123Z',
            actor: 'model in task task_0123456789abcdef0123456789abcdef',
            task_id: 'task_0123456789abcdef0123456789abcdef',
            kind: 'call',
            subject: 'write_file',
            ok: false,
            detail: 'awaiting approval apr_1',
          },
          {
            ...row,
            id: 2,
            at: '2026-11-28T14:02:00.000Z',
            actor: 'admin',
            task_id: null,
            kind: 'reload',
            subject: 'toolsets',
            ok: true,
            detail: '{"added":["bank"],"removed":[],"warnings":[]}',
          },
        ] as never,
        null,
        {},
        ['call', 'reload'],
      ),
    );
    expect(page).toContain(
      '<time datetime="2026-11-28T14:01:37.123Z" title="2026-11-28T14:01:37.123Z">2026-11-28 14:01:37</time>',
    );
    expect(page).toContain('<span title="model in task task_0123456789abcdef0123456789abcdef">model</span>');
    expect(page).toContain('>asked a human</span>');
    expect(page).not.toContain('>refused</span>');
    expect(page).toContain('added: bank · removed: none · warnings: none');
  });

  it('list the decisions made, with who, when, the decision and the reason', async () => {
    const decided = {
      session_id: 's1',
      task_id: 'task_1',
      kind: 'call' as const,
      subject: 'write_file',
      arguments: null,
      reason: 'policy asks',
      created_at: '2026-11-28T14:00:00.000Z',
      expires_at: '2026-11-28T15:00:00.000Z',
      for_user: null,
    };
    const page = String(
      await approvalsPage([], can, {
        approvals: [
          {
            ...decided,
            id: 'apr_1',
            status: 'used',
            decided_at: '2026-11-28T14:01:00.000Z',
            decided_by: 'user (AGENT_API_TOKEN)',
            decision_reason: 'fine <i>by me</i>',
          },
          {
            ...decided,
            id: 'apr_2',
            status: 'denied',
            decided_at: '2026-11-28T14:02:00.000Z',
            decided_by: 'admin',
            decision_reason: null,
          },
          {
            ...decided,
            id: 'apr_3',
            status: 'pending',
            decided_at: null,
            decided_by: null,
            decision_reason: null,
          },
        ],
      }),
    );
    const row = (id: string) =>
      page.slice(
        page.indexOf(`data-decided="${id}"`),
        page.indexOf('</tr>', page.indexOf(`data-decided="${id}"`)),
      );
    expect(row('apr_1')).toContain('2026-11-28 14:01:00');
    expect(row('apr_1')).toContain('<span class="ok">approved</span>');
    expect(row('apr_1')).toContain('approver (AGENT_API_TOKEN)');
    expect(row('apr_1')).toContain('fine &lt;i&gt;by me&lt;/i&gt;');
    expect(row('apr_2')).toContain('<span class="refused">denied</span>');
    expect(row('apr_2')).toContain('operator (GATEWAY_ADMIN_TOKEN)');
    // The pending one waits in the queue above, not in the history.
    expect(page).not.toContain('data-decided="apr_3"');
  });

  it("escape a thread's title, goals and answers, follow only a turn that runs, and give a viewer no form", async () => {
    const hostile = '<img src=x onerror=alert(1)>';
    const thread = {
      thread_id: 'thr_00000000-0000-0000-0000-000000000001',
      session_id: 'ses_1',
      title: hostile,
      webhook: null,
      created_at: '2026-11-28T14:00:00.000Z',
      updated_at: '2026-11-28T14:05:00.000Z',
    };
    const turn = {
      task_id: 'task_1',
      goal: hostile,
      status: 'completed' as const,
      final_answer: '<script>alert(2)</script>',
      error: null,
      created_at: '2026-11-28T14:00:00.000Z',
      finished_at: '2026-11-28T14:01:00.000Z',
    };
    const detail = {
      ...thread,
      turns: [turn, { ...turn, task_id: 'task_2', status: 'running' as const, final_answer: null }],
      compaction: { summarised_messages: 3, stubbed_results: 2 },
    };
    const page = String(await threadPage(detail, can));
    const list = String(await threadsPage([thread]));
    for (const html of [page, list]) {
      expect(html).not.toContain('<img');
      expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    }
    expect(page).not.toContain('<script');
    expect(page).toMatch(/data-turn="task_1"\s*>/);
    expect(page).toMatch(/data-turn="task_2" data-live>/);
    expect(page).toContain('2 results moved out, 3 messages summarised');
    expect(page).toContain(`data-continue="${thread.thread_id}"`);
    const viewer = String(await threadPage(detail, { run: false, decide: false, operate: false }));
    expect(viewer).not.toContain('data-continue');
    expect(viewer).toContain("Continuing a thread needs an approver's or the operator's login.");
  });

  it("draw at most 500 users and say so, escape people's text, and say why a key no longer opens anything", async () => {
    const user = (i: number) => ({
      id: `u${i}`,
      name: `user${i}`,
      email: i === 0 ? '"><script>alert(1)</script>' : null,
      limits: { tasks_per_hour: 1000 },
      teams: [],
      created_at: '2026-11-26T00:00:00Z',
    });
    const key = (id: string, more: object) => ({
      id,
      user: 'user0',
      role: 'runner' as const,
      label: null,
      created_at: '2026-11-26T00:00:00Z',
      expires_at: null,
      last_used_at: null,
      revoked_at: null,
      ...more,
    });
    const page = String(
      await peoplePage(
        {
          users: Array.from({ length: PEOPLE_SHOWN + 1 }, (_, i) => user(i)),
          keys: [
            key('expiredkey', { expires_at: '2026-11-27T00:00:00Z' }),
            key('orphankey0', { user: '(removed)' }),
          ],
          teams: [],
        },
        Date.parse('2026-11-28T00:00:00Z'),
      ),
    );
    expect(page.match(/<tr data-user=/g)).toHaveLength(PEOPLE_SHOWN);
    expect(page).toContain('501 users: the first 500 are shown');
    expect(page).toContain('1,000 tasks/hour');
    expect(page).toContain('&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page).not.toContain('<script>');
    const row = (id: string) =>
      page.slice(page.indexOf(`data-key="${id}"`), page.indexOf('</tr>', page.indexOf(`data-key="${id}"`)));
    expect(row('expiredkey')).toContain('>expired<');
    expect(row('orphankey0')).toContain('>user removed<');
  });
});
