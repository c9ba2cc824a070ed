import { symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowList } from '../../lib/net/allow-list.ts';
import type { ToolDefinition } from '../../tool-server/contract.ts';
import { createRegistry } from '../../tool-server/registry.ts';
import { type NativeContext, nativeTools } from '../../tool-server/tools/native.ts';
import { type LocalServer, localServer, tableResolver } from '../helpers/web-servers.ts';
import { commit, type GitWorld, git, gitWorld, initRepo } from './git/fixtures.ts';

// Every native tool's output schema against what the tool really returns: each tool is called (its result
// variants too: a failed file among several, a dry run, a cut tree, a section of a pull request that could not
// be read …) and each result is validated with ajv against the schema the tool-server lists. A schema that
// leaves out a field, names one the tool does not return, or types one wrongly fails here.

const registry = createRegistry(nativeTools);
const definitions = new Map(registry.definitions().map((d) => [d.name, d]));
const ajv = new Ajv2020({ strict: false, allErrors: true });
const validators = new Map(
  [...definitions.values()].map((d) => [d.name, ajv.compile(d.outputSchema as Record<string, unknown>)]),
);
/** The tools called so far, to check that none was left out. */
const called = new Set<string>();

let world: GitWorld;
let site: LocalServer;
let ctx: NativeContext;

const SHA = '6dcb09b5b57875f334f61aebed695e2e4193db5e';
const REPO = '/repos/octo-org/hello-world';
const PNG = Buffer.from([
  0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52,
]);

/** GitHub's REST API as the pull request tool reads it (only the fields it reads); `/status` of one commit fails. */
function githubFetch(failing: RegExp | null): typeof fetch {
  const branch = (ref: string, sha: string) => ({ ref, sha, repo: { full_name: 'octo-org/hello-world' } });
  const answers: [RegExp, unknown][] = [
    [
      /\/pulls\/7$/,
      {
        html_url: 'https://github.com/octo-org/hello-world/pull/7',
        number: 7,
        title: 'A change',
        state: 'open',
        draft: false,
        merged: false,
        user: { login: 'octocat' },
        body: 'Why',
        created_at: '2024-01-02T03:04:05Z',
        updated_at: '2024-01-02T03:04:05Z',
        closed_at: null,
        merged_at: null,
        base: branch('main', '9049f1265b7d61be4a8904a9a27120d2064dab3b'),
        head: { ref: 'topic', sha: SHA, repo: null },
        labels: [{ name: 'bug' }],
        requested_reviewers: [{ login: 'hubot' }],
        mergeable: null,
        changed_files: 2,
      },
    ],
    [
      /\/files\?/,
      [
        { filename: 'a.ts', status: 'modified', additions: 1, deletions: 2, changes: 3 },
        { filename: 'b.ts', status: 'renamed', additions: 0, deletions: 0, previous_filename: 'c.ts' },
      ],
    ],
    [/\/reviews\?/, [{ user: { login: 'alice' }, state: 'APPROVED', submitted_at: '2024-01-03T00:00:00Z' }]],
    [
      /\/check-runs\?/,
      {
        total_count: 1,
        check_runs: [
          { name: 'ci', status: 'completed', conclusion: 'success', html_url: null, app: { slug: 'gha' } },
        ],
      },
    ],
    [/\/status$/, { state: 'pending', total_count: 1, statuses: [{ context: 'lint', state: 'pending' }] }],
  ];
  return async (input) => {
    const url = String(input);
    if (failing?.test(url)) return Response.json({ message: 'Resource not accessible' }, { status: 403 });
    const answer = answers.find(([pattern]) => pattern.test(url));
    return answer ? Response.json(answer[1]) : Response.json({ message: 'Not Found' }, { status: 404 });
  };
}

/** Brave's search answer (web_search reads query and web.results). */
const braveFetch: typeof fetch = async () =>
  Response.json({
    query: { original: 'kettles', more_results_available: true },
    web: {
      results: [
        {
          title: 'Kettles <strong>of</strong> the world',
          url: 'https://kettles.test/',
          description: 'Hot',
          age: '2 days ago',
        },
        { title: 'Copper', url: 'https://copper.test/' },
      ],
    },
  });

beforeAll(async () => {
  world = await gitWorld();
  const { root } = world;
  await writeFile(path.join(root, 'pic.png'), PNG);
  await symlink(path.join(root, 'pic.png'), path.join(root, 'link.png'));
  const repo = await initRepo(world, path.join(root, 'repo'));
  await commit(world, repo, { 'a.txt': 'one\n', 'bin.dat': '\0\x01' }, 'first');
  await commit(world, repo, { 'a.txt': 'one\ntwo\n', 'b.txt': 'b\n' }, 'second\n\nwith a body');
  git(world, repo, ['branch', 'topic']);
  git(world, repo, ['mv', 'b.txt', 'c.txt']);
  await writeFile(path.join(repo, 'a.txt'), 'one\n2\n');
  await writeFile(path.join(repo, 'new.txt'), 'new\n');
  const db = new Database(path.join(root, 'shop.db'));
  db.exec(`
    CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, vip INTEGER DEFAULT 0);
    CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id) ON DELETE CASCADE,
      total REAL, big INTEGER, data BLOB, twice INTEGER GENERATED ALWAYS AS (total * 2) VIRTUAL);
    CREATE INDEX orders_by_customer ON orders(customer_id, total);
    INSERT INTO customers (name) VALUES ('Ann');
    INSERT INTO orders (customer_id, total, big, data) VALUES (1, 9.5, 9007199254740993, x'00ff10'), (1, NULL, 2, NULL);`);
  db.close();
  await writeFile(path.join(root, 'empty.sqlite'), '');
  site = await localServer((req, res) => {
    const html = req.url === '/page';
    res.writeHead(200, { 'content-type': html ? 'text/html; charset=utf-8' : 'text/plain' });
    res.end(
      html
        ? '<html><head><title>Kettles</title></head><body><p>Hot water.</p></body></html>'
        : 'x'.repeat(300),
    );
  });
  ctx = {
    ...world.ctx,
    web: {
      braveApiKey: 'BSA-test-key',
      searchFetch: braveFetch,
      resolve: tableResolver({}).resolve,
      allow: parseAllowList([`127.0.0.1:${site.port}`], 'FETCH_ALLOW_HOSTS'),
    },
    github: { fetch: githubFetch(null) },
  };
});

afterAll(async () => {
  await site?.close();
  await world?.cleanup();
});

/** Calls a tool through the registry; its result must succeed and match the listed output schema. */
async function check(name: string, args: Record<string, unknown>, context: NativeContext = ctx) {
  called.add(name);
  const outcome = await registry.call(name, args, context);
  expect(outcome.error, `${name} ${JSON.stringify(args)}`).toBeUndefined();
  const validate = validators.get(name);
  if (!validate) throw new Error(`${name} is not listed`);
  const valid = validate(outcome.result);
  expect(valid ? [] : validate.errors, `${name} ${JSON.stringify(args)}`).toEqual([]);
  return outcome.result as Record<string, unknown>;
}

describe('every native tool’s result matches its output schema', () => {
  it('lists an output schema for every tool, made like the input schema (JSON Schema objects)', () => {
    for (const d of definitions.values() as Iterable<ToolDefinition>) {
      expect(d.outputSchema, d.name).toMatchObject({ type: 'object' });
      expect(d.outputSchema, d.name).not.toHaveProperty('$schema');
    }
  });

  it('the file tools', async () => {
    await check('list_allowed_directories', {});
    await check('write_file', { path: 'notes.txt', content: 'alpha\nbeta\n' });
    await check('write_file', { path: 'notes.txt', content: 'alpha\nbeta\ngamma\n' });
    await check('edit_file', {
      path: 'notes.txt',
      edits: [{ old_text: 'beta', new_text: 'BETA' }],
      dry_run: true,
    });
    await check('edit_file', { path: 'notes.txt', edits: [{ old_text: 'beta', new_text: 'BETA' }] });
    await check('read_text_file', { path: 'notes.txt' });
    await check('read_text_file', { path: 'notes.txt', tail: 1 });
    await check('read_text_file', { path: 'repo/bin.dat' });
    const several = await check('read_multiple_files', { paths: ['notes.txt', 'missing.txt'] });
    expect(several).toMatchObject({ succeeded: 1, failed: 1 });
    await check('read_media_file', { path: 'pic.png' });
    await check('create_directory', { path: 'tree/a/b/c' });
    await check('create_directory', { path: 'tree/a' });
    await writeFile(path.join(world.root, 'tree/a/b/c/deep.txt'), 'deep');
    await check('list_directory', { path: '.' });
    await check('list_directory_with_sizes', { path: '.', sort_by: 'size' });
    const tree = await check('directory_tree', { path: 'tree', max_depth: 2 });
    expect(JSON.stringify(tree)).toContain('"depth_limited":true');
    await check('directory_tree', { path: '.', exclude_patterns: ['.git'] });
    await check('search_files', { path: '.', pattern: '*.txt', max_results: 2 });
    await check('get_file_info', { path: 'notes.txt' });
    const link = await check('get_file_info', { path: 'link.png' });
    expect(link).toHaveProperty('symlink_path');
    await check('move_file', { source: 'notes.txt', destination: 'tree/moved.txt' });
    await check('delete_file', { path: 'tree/moved.txt' });
    await check('create_directory', { path: 'gone' });
    await check('delete_directory', { path: 'gone' });
    await check('delete_directory', { path: 'tree', recursive: true });
  });

  it('the git tools', async () => {
    await check('git_status', { repository: 'repo' });
    await check('git_diff', { repository: 'repo' });
    await check('git_diff', { repository: 'repo', staged: true, stat_only: true });
    await check('git_diff', { repository: 'repo', from: 'HEAD~1', to: 'HEAD' });
    await check('git_log', { repository: 'repo', limit: 1 });
    await check('git_show', { repository: 'repo' });
    await check('git_show', { repository: 'repo', ref: 'HEAD~1', stat_only: true });
    await check('git_branches', { repository: 'repo' });
  });

  it('the GitHub pull request tool, whole and with a section that could not be read', async () => {
    const whole = await check('get_github_pull_request_info', {
      owner: 'octo-org',
      repo: 'hello-world',
      number: 7,
    });
    expect(whole.checks).toMatchObject({ state: 'pending', total: 2 });
    const failing = { ...ctx, github: { fetch: githubFetch(/\/(check-runs|status|reviews)/) } };
    const part = await check(
      'get_github_pull_request_info',
      { url: `https://github.com${REPO.slice(6)}/pull/7` },
      failing,
    );
    expect(part.checks).toHaveProperty('error');
  });

  it('the web tools', async () => {
    await check('web_search', { query: 'kettles' });
    await check('fetch_url', { url: `${site.origin}/page` });
    const text = await check('fetch_url', { url: `${site.origin}/plain`, max_chars: 100 });
    expect(text).toMatchObject({ truncated: true, next_start_index: 100 });
  });

  it('the database tools', async () => {
    await check('list_databases', {});
    await check('list_tables', { path: 'shop.db', include_system: true });
    await check('describe_table', { path: 'shop.db', table: 'orders' });
    await check('describe_table', { path: 'shop.db', table: 'customers' });
    const rows = await check('query', { path: 'shop.db', sql: 'SELECT * FROM orders', max_rows: 1 });
    expect(rows).toMatchObject({ truncated: true, row_count: 1 });
  });

  it('called every native tool', () => {
    expect([...called].sort()).toEqual([...definitions.keys()].sort());
  });

  it('fails a result with a field its schema does not declare, or without one it requires', () => {
    const validate = validators.get('create_directory');
    expect(validate?.({ path: '/x', action: 'created' })).toBe(true);
    expect(validate?.({ path: '/x', action: 'created', extra: 1 })).toBe(false);
    expect(validate?.({ path: '/x' })).toBe(false);
  });
});
