import { afterEach, describe, expect, it } from 'vitest';
import { loadOverview } from '../../../agent-server/console/overview.ts';
import { overviewPage } from '../../../agent-server/console/pages.ts';
import { loadConfig } from '../../../lib/config/config.ts';
import { createReachability, describeDatabase } from '../../../lib/db/reachability.ts';
import { readyLine } from '../../../start/stack.ts';
import { answer, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// Which database and which model a daemon uses, and whether the database answers: said by the ready line and
// the console's Overview (agent-server/console/overview.ts), never with the database's user or password.

const URL_WITH_SECRET = 'postgres://toolshift:s3cret-pw@db.internal:6543/tasks_prod?sslmode=require';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const text = (html: unknown) =>
  String(html)
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ');

describe('the database and model in use', () => {
  it('the ready line names PostgreSQL by host, port and database, never its user or password', () => {
    const config = loadConfig({ DATABASE_URL: URL_WITH_SECRET, TOOLSHIFT_DATA_DIR: '/srv/toolshift' });
    const line = readyLine({ agent: 'http://127.0.0.1:8000', gateway: 'http://127.0.0.1:8080' }, config);
    expect(line).toContain('database PostgreSQL db.internal:6543/tasks_prod');
    expect(line).not.toContain('s3cret-pw');
    expect(line).not.toContain('toolshift:');
    // The embedded default says SQLite.
    expect(readyLine({ agent: 'a', gateway: 'g' }, loadConfig({ TOOLSHIFT_DATA_DIR: '/srv/t' }))).toContain(
      'data in /srv/t (SQLite)',
    );
    expect(describeDatabase('not a url', '/d')).toBe('PostgreSQL (DATABASE_URL)');
  });

  it('the Overview shows the model endpoint and name, and the database down with since when, while still served', async () => {
    stack = await makeStack({ model: new ScriptedModel([answer('ok')]) });
    const reach = createReachability('PostgreSQL, DATABASE_URL');
    try {
      const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.9:6543'), {
        code: 'ECONNREFUSED',
      });
      reach.down(refused);
      const down = () => Promise.reject(reach.unavailable());
      const data = await loadOverview(
        {
          agent: stack.agent,
          // The store's statements find the database gone, as PostgreSQL's do in an outage.
          store: { ...stack.taskStore, countTasks: down, recentTasks: down, awaiting: down },
          model: { name: 'gpt-test', baseURL: 'http://127.0.0.1:9/v1' },
          database: describeDatabase(URL_WITH_SECRET, '/srv'),
        },
        // A gateway nobody listens for.
        { baseUrl: 'http://127.0.0.1:9' },
      );
      const page = text(overviewPage(data));
      expect(page).toContain('model gpt-test at http://127.0.0.1:9/v1');
      expect(page).toMatch(
        /database down PostgreSQL db\.internal:6543\/tasks_prod: unreachable since \d{4}-\d\d-\d\dT[\d:.]+Z \(connect ECONNREFUSED/,
      );
      expect(page).toContain(
        'Task figures unavailable: The database (PostgreSQL, DATABASE_URL) is unreachable',
      );
      expect(page).toMatch(/mcp-gateway down/);
      expect(page).not.toContain('s3cret-pw');
    } finally {
      reach.forget();
    }
    // Back: the database is shown up, with the task counts.
    const data = await loadOverview(
      { agent: stack.agent, store: stack.taskStore, database: 'SQLite in /srv' },
      { baseUrl: 'http://127.0.0.1:9' },
    );
    expect(text(overviewPage(data))).toContain('database ok SQLite in /srv');
    expect(data.unavailable).toBeUndefined();
  });
});
