import { describe, expect, it } from 'vitest';
import { approvalCard, taskPage } from '../../../agent-server/console/pages.ts';

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
