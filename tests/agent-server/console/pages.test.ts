import { describe, expect, it } from 'vitest';
import { approvalCard, taskPage } from '../../../agent-server/console/pages.ts';
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
        75,
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
      /would cost at least 75 tokens\s+of tool definitions per model request \(not counted yet: memory, whose/,
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
    expect(page).not.toContain('<script>');
  });
});
