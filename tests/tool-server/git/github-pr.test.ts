import { Writable } from 'node:stream';
import { delay, HttpResponse, http } from 'msw';
import { setupServer } from 'msw/node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import { createLogger } from '../../../lib/telemetry/log.ts';
import { createToolServerApp } from '../../../tool-server/app.ts';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { ToolError } from '../../../tool-server/kit/errors.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import type { GitToolContext } from '../../../tool-server/tools/git/context.ts';
import type { GitHubSettings } from '../../../tool-server/tools/git/github/api.ts';
import { gitTools } from '../../../tool-server/tools/git/tools.ts';

// get_github_pull_request_info against GitHub's REST API mocked at the HTTP edge (msw), with response
// bodies and headers in GitHub's real shapes (trimmed of fields the tool does not read, not reshaped).

const API = 'https://api.github.com';
const TOKEN = 'ghp_TESTtoken0123456789abcdefghijklmnopqr';
const REPO = '/repos/octo-org/hello-world';

const server = setupServer();
/** Every request msw saw: method, URL and the headers that matter. */
let seen: { url: string; authorization: string | null; accept: string | null; version: string | null }[] = [];

beforeAll(() => {
  server.listen({ onUnhandledRequest: 'error' });
  server.events.on('request:start', ({ request }) => {
    seen.push({
      url: request.url,
      authorization: request.headers.get('authorization'),
      accept: request.headers.get('accept'),
      version: request.headers.get('x-github-api-version'),
    });
  });
});
afterEach(() => {
  server.resetHandlers();
  seen = [];
});
afterAll(() => server.close());

const user = (login: string, id: number) => ({
  login,
  id,
  node_id: `MDQ6VXNlcj${id}`,
  avatar_url: `https://avatars.githubusercontent.com/u/${id}?v=4`,
  url: `${API}/users/${login}`,
  html_url: `https://github.com/${login}`,
  type: 'User',
  site_admin: false,
});

const repoJson = (fullName: string) => ({
  id: 1296269,
  node_id: 'MDEwOlJlcG9zaXRvcnkxMjk2MjY5',
  name: fullName.split('/')[1],
  full_name: fullName,
  owner: user(fullName.split('/')[0], 1),
  private: false,
  html_url: `https://github.com/${fullName}`,
  default_branch: 'main',
});

/** GET /repos/{owner}/{repo}/pulls/{number}, as GitHub sends it. */
function pullJson(overrides: Record<string, unknown> = {}) {
  return {
    url: `${API}${REPO}/pulls/1347`,
    id: 1,
    node_id: 'MDExOlB1bGxSZXF1ZXN0MQ==',
    html_url: 'https://github.com/octo-org/hello-world/pull/1347',
    diff_url: 'https://github.com/octo-org/hello-world/pull/1347.diff',
    patch_url: 'https://github.com/octo-org/hello-world/pull/1347.patch',
    issue_url: `${API}${REPO}/issues/1347`,
    number: 1347,
    state: 'open',
    locked: false,
    title: 'Amazing new feature',
    user: user('octocat', 583231),
    body: 'Please pull these awesome changes in!',
    labels: [
      { id: 208045946, node_id: 'MDU6TGFiZWwyMDgwNDU5NDY=', name: 'bug', color: 'f29513', default: true },
    ],
    milestone: null,
    active_lock_reason: null,
    created_at: '2011-01-26T19:01:12Z',
    updated_at: '2011-01-26T19:01:12Z',
    closed_at: null,
    merged_at: null,
    merge_commit_sha: 'e5bd3914e2e596debea16f433f57875b5b90bcd6',
    assignees: [],
    requested_reviewers: [user('hubot', 2)],
    requested_teams: [],
    head: {
      label: 'contributor:new-topic',
      ref: 'new-topic',
      sha: '6dcb09b5b57875f334f61aebed695e2e4193db5e',
      user: user('contributor', 3),
      repo: repoJson('contributor/hello-world'),
    },
    base: {
      label: 'octo-org:main',
      ref: 'main',
      sha: '9049f1265b7d61be4a8904a9a27120d2064dab3b',
      user: user('octo-org', 1),
      repo: repoJson('octo-org/hello-world'),
    },
    author_association: 'CONTRIBUTOR',
    auto_merge: null,
    draft: false,
    merged: false,
    mergeable: true,
    rebaseable: true,
    mergeable_state: 'clean',
    merged_by: null,
    comments: 10,
    review_comments: 0,
    maintainer_can_modify: true,
    commits: 3,
    additions: 100,
    deletions: 3,
    changed_files: 3,
    ...overrides,
  };
}

/** One entry of GET …/pulls/{number}/files. */
const fileJson = (filename: string, status: string, additions: number, deletions: number, extra = {}) => ({
  sha: 'bbcd538c8e72b8c175046e27cc8f907076331401',
  filename,
  status,
  additions,
  deletions,
  changes: additions + deletions,
  blob_url: `https://github.com/octo-org/hello-world/blob/6dcb09b/${filename}`,
  raw_url: `https://github.com/octo-org/hello-world/raw/6dcb09b/${filename}`,
  contents_url: `${API}${REPO}/contents/${filename}?ref=6dcb09b`,
  patch: '@@ -132,7 +132,7 @@ module Test @@ -1000,7 +1000,7 @@ module Test',
  ...extra,
});

/** One entry of GET …/pulls/{number}/reviews. */
const reviewJson = (id: number, login: string, state: string, submitted: string) => ({
  id,
  node_id: `MDE3OlB1bGxSZXF1ZXN0UmV2aWV3${id}`,
  user: user(login, 100 + id),
  body: 'Here is the body for the review.',
  state,
  html_url: `https://github.com/octo-org/hello-world/pull/1347#pullrequestreview-${id}`,
  pull_request_url: `${API}${REPO}/pulls/1347`,
  author_association: 'COLLABORATOR',
  _links: { html: { href: 'x' }, pull_request: { href: 'y' } },
  submitted_at: submitted,
  commit_id: 'ecdd80bb57125d7ba9641ffaa4d7d2c19d3f3091',
});

/** One entry of GET /repos/{owner}/{repo}/commits/{ref}/check-runs. */
const checkRunJson = (id: number, name: string, status: string, conclusion: string | null) => ({
  id,
  head_sha: '6dcb09b5b57875f334f61aebed695e2e4193db5e',
  node_id: `MDg6Q2hlY2tSdW40${id}`,
  external_id: '',
  url: `${API}${REPO}/check-runs/${id}`,
  html_url: `https://github.com/octo-org/hello-world/runs/${id}`,
  details_url: 'https://example.com',
  status,
  conclusion,
  started_at: '2018-05-04T01:14:52Z',
  completed_at: status === 'completed' ? '2018-05-04T01:14:52Z' : null,
  output: { title: 'Mighty Readme report', summary: 'There are 0 failures.', text: '', annotations_count: 0 },
  name,
  check_suite: { id: 5 },
  app: { id: 1, slug: 'github-actions', node_id: 'MDExOkludGVncmF0aW9uMQ==', name: 'GitHub Actions' },
  pull_requests: [],
});

/** GET /repos/{owner}/{repo}/commits/{ref}/status (the combined status). */
const combinedStatusJson = (state: string, statuses: { context: string; state: string }[]) => ({
  state,
  statuses: statuses.map((s, i) => ({
    url: `${API}${REPO}/statuses/6dcb09b5b57875f334f61aebed695e2e4193db5e`,
    avatar_url: 'https://github.com/images/error/hubot_happy.gif',
    id: i + 1,
    node_id: `MDY6U3RhdHVz${i}`,
    state: s.state,
    description: 'Build has completed successfully',
    target_url: 'https://ci.example.com/1000/output',
    context: s.context,
    created_at: '2012-07-20T01:19:13Z',
    updated_at: '2012-07-20T01:19:13Z',
  })),
  sha: '6dcb09b5b57875f334f61aebed695e2e4193db5e',
  total_count: statuses.length,
  repository: repoJson('octo-org/hello-world'),
  commit_url: `${API}${REPO}/commits/6dcb09b5b57875f334f61aebed695e2e4193db5e`,
  url: `${API}${REPO}/commits/6dcb09b5b57875f334f61aebed695e2e4193db5e/status`,
});

const SHA = '6dcb09b5b57875f334f61aebed695e2e4193db5e';

/** A full, healthy set of endpoints for PR 1347; `override` replaces any of them. */
function pullRequestHandlers(pr = pullJson(), override: Parameters<typeof server.use> = []) {
  server.use(
    ...override,
    http.get(`${API}${REPO}/pulls/1347`, () => HttpResponse.json(pr)),
    http.get(`${API}${REPO}/pulls/1347/files`, () =>
      HttpResponse.json([
        fileJson('file1.txt', 'added', 100, 0),
        fileJson('src/old.ts', 'modified', 0, 2),
        fileJson('src/new.ts', 'renamed', 0, 1, { previous_filename: 'src/older.ts' }),
      ]),
    ),
    http.get(`${API}${REPO}/pulls/1347/reviews`, () =>
      HttpResponse.json([
        reviewJson(1, 'alice', 'CHANGES_REQUESTED', '2019-11-17T17:43:43Z'),
        reviewJson(2, 'bob', 'COMMENTED', '2019-11-17T18:00:00Z'),
        reviewJson(3, 'alice', 'APPROVED', '2019-11-18T10:00:00Z'),
        reviewJson(4, 'alice', 'COMMENTED', '2019-11-18T11:00:00Z'),
        reviewJson(5, 'carol', 'PENDING', '2019-11-18T12:00:00Z'),
      ]),
    ),
    http.get(`${API}${REPO}/commits/${SHA}/check-runs`, () =>
      HttpResponse.json({
        total_count: 3,
        check_runs: [
          checkRunJson(4, 'build', 'completed', 'success'),
          checkRunJson(5, 'lint', 'completed', 'failure'),
          checkRunJson(6, 'docs', 'completed', 'skipped'),
        ],
      }),
    ),
    http.get(`${API}${REPO}/commits/${SHA}/status`, () =>
      HttpResponse.json(combinedStatusJson('pending', [{ context: 'ci/legacy', state: 'pending' }])),
    ),
  );
}

async function ctxWith(github: GitHubSettings = {}): Promise<GitToolContext> {
  const paths = await PathGuard.create({ roots: [], readOnlyRoots: ['/'] });
  return { paths, maxReadBytes: 1024, github: { apiUrl: API, ...github } };
}

const tool = gitTools.find((t) => t.name === 'get_github_pull_request_info')!;
const run = async (args: unknown, github?: GitHubSettings) =>
  tool.run(args, await ctxWith(github)) as Promise<any>;

async function failsWith(args: unknown, message: RegExp, github?: GitHubSettings): Promise<string> {
  const err = await run(args, github).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  expect((err as Error).message).toMatch(message);
  return (err as Error).message;
}

describe('get_github_pull_request_info', () => {
  it('reads a pull request by URL: metadata, files, each reviewer’s standing and a checks summary', async () => {
    pullRequestHandlers();
    const result = await run({ url: 'https://github.com/octo-org/hello-world/pull/1347/files?w=1#diff' });
    expect(result).toMatchObject({
      url: 'https://github.com/octo-org/hello-world/pull/1347',
      owner: 'octo-org',
      repo: 'hello-world',
      number: 1347,
      title: 'Amazing new feature',
      state: 'open',
      draft: false,
      author: 'octocat',
      base: { ref: 'main', sha: '9049f1265b7d61be4a8904a9a27120d2064dab3b', repo: 'octo-org/hello-world' },
      head: { ref: 'new-topic', sha: SHA, repo: 'contributor/hello-world' },
      body: 'Please pull these awesome changes in!',
      body_truncated: false,
      labels: ['bug'],
      requested_reviewers: ['hubot'],
      mergeable: true,
      stats: { commits: 3, additions: 100, deletions: 3, changed_files: 3, comments: 10, review_comments: 0 },
    });
    expect(result.files).toEqual({
      items: [
        { path: 'file1.txt', status: 'added', additions: 100, deletions: 0 },
        { path: 'src/old.ts', status: 'modified', additions: 0, deletions: 2 },
        { path: 'src/new.ts', status: 'renamed', additions: 0, deletions: 1, previous_path: 'src/older.ts' },
      ],
      count: 3,
      truncated: false,
    });
    expect(result.reviews).toEqual({
      decision: 'approved',
      approved: 1,
      changes_requested: 0,
      commented: 1,
      by_reviewer: [
        { login: 'alice', state: 'APPROVED', submitted_at: '2019-11-18T10:00:00Z' },
        { login: 'bob', state: 'COMMENTED', submitted_at: '2019-11-17T18:00:00Z' },
      ],
      reviews_read: 5,
    });
    expect(result.checks).toMatchObject({
      state: 'failure',
      total: 4,
      passed: 1,
      failed: 1,
      pending: 1,
      skipped: 1,
    });
    expect(result.checks.runs.map((r: any) => [r.name, r.source, r.conclusion])).toEqual([
      ['build', 'check_run', 'success'],
      ['lint', 'check_run', 'failure'],
      ['docs', 'check_run', 'skipped'],
      ['ci/legacy', 'status', null],
    ]);
    expect(seen.length).toBe(5);
    expect(seen.every((r) => r.authorization === null)).toBe(true);
    expect(seen.every((r) => r.accept === 'application/vnd.github+json' && r.version === '2022-11-28')).toBe(
      true,
    );
  });

  it('reads by owner/repo/number with the token, and reports merged, passing and check-less pull requests', async () => {
    pullRequestHandlers(pullJson({ state: 'closed', merged: true, merged_at: '2011-01-27T10:00:00Z' }), [
      http.get(`${API}${REPO}/commits/${SHA}/check-runs`, () =>
        HttpResponse.json({ total_count: 1, check_runs: [checkRunJson(1, 'build', 'completed', 'success')] }),
      ),
      http.get(`${API}${REPO}/commits/${SHA}/status`, () =>
        HttpResponse.json(combinedStatusJson('success', [{ context: 'ci', state: 'success' }])),
      ),
    ]);
    const merged = await run({ owner: 'octo-org', repo: 'hello-world', number: 1347 }, { token: TOKEN });
    expect(merged).toMatchObject({ state: 'merged', merged_at: '2011-01-27T10:00:00Z' });
    expect(merged.checks).toMatchObject({ state: 'success', total: 2, passed: 2 });
    expect(seen.length).toBe(5);
    expect(seen.every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(JSON.stringify(merged)).not.toContain(TOKEN);

    server.resetHandlers();
    pullRequestHandlers(pullJson(), [
      http.get(`${API}${REPO}/commits/${SHA}/check-runs`, () =>
        HttpResponse.json({ total_count: 0, check_runs: [] }),
      ),
      http.get(`${API}${REPO}/commits/${SHA}/status`, () =>
        HttpResponse.json(combinedStatusJson('pending', [])),
      ),
      http.get(`${API}${REPO}/pulls/1347/reviews`, () =>
        HttpResponse.json([reviewJson(1, 'dave', 'CHANGES_REQUESTED', '2019-11-17T17:43:43Z')]),
      ),
    ]);
    const bare = await run({ owner: 'octo-org', repo: 'hello-world', number: 1347 });
    expect(bare.checks).toMatchObject({ state: 'none', total: 0 });
    expect(bare.reviews).toMatchObject({ decision: 'changes_requested', changes_requested: 1 });
  });

  it('pages through the files and stops at max_files', async () => {
    const many = Array.from({ length: 130 }, (_, i) => fileJson(`f${i}.txt`, 'added', 1, 0));
    pullRequestHandlers(pullJson({ changed_files: 130 }), [
      http.get(`${API}${REPO}/pulls/1347/files`, ({ request }) => {
        const page = Number(new URL(request.url).searchParams.get('page'));
        const perPage = Number(new URL(request.url).searchParams.get('per_page'));
        return HttpResponse.json(many.slice((page - 1) * perPage, page * perPage));
      }),
    ]);
    const all = await run({ owner: 'octo-org', repo: 'hello-world', number: 1347 });
    expect(all.files).toMatchObject({ count: 130, truncated: false });
    expect(all.files.items.at(-1).path).toBe('f129.txt');
    seen = [];
    const capped = await run({ owner: 'octo-org', repo: 'hello-world', number: 1347, max_files: 50 });
    expect(capped.files).toMatchObject({ count: 50, truncated: true });
    expect(seen.filter((r) => r.url.includes('/files')).length).toBe(1);
  });

  it('caps a long body with a marker', async () => {
    pullRequestHandlers(pullJson({ body: 'x'.repeat(20_000) }));
    const result = await run({ owner: 'octo-org', repo: 'hello-world', number: 1347 });
    expect(result.body_truncated).toBe(true);
    expect(result.body).toMatch(/x\n\[truncated: showed 16000 of 20000 characters\]$/);
  });

  it('reports 404, 401 and 403 rate limits clearly, with what to do', async () => {
    const notFound = {
      message: 'Not Found',
      documentation_url: 'https://docs.github.com/rest/pulls/pulls#get-a-pull-request',
      status: '404',
    };
    server.use(http.get(`${API}${REPO}/pulls/1347`, () => HttpResponse.json(notFound, { status: 404 })));
    await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /pull request octo-org\/hello-world#1347 was not found on GitHub \(404\).*no GITHUB_TOKEN is set/,
    );

    server.resetHandlers();
    const badCredentials = {
      message: 'Bad credentials',
      documentation_url: 'https://docs.github.com/rest',
      status: '401',
    };
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, () => HttpResponse.json(badCredentials, { status: 401 })),
    );
    await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /GitHub rejected GITHUB_TOKEN \(401 Bad credentials\)/,
      {
        token: TOKEN,
      },
    );
    await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /requires authentication .* set GITHUB_TOKEN/,
    );

    server.resetHandlers();
    const reset = Math.floor(Date.now() / 1000) + 600;
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, () =>
        HttpResponse.json(
          {
            message:
              "API rate limit exceeded for 203.0.113.7. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)",
            documentation_url:
              'https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting',
          },
          {
            status: 403,
            headers: {
              'x-ratelimit-limit': '60',
              'x-ratelimit-remaining': '0',
              'x-ratelimit-reset': String(reset),
              'x-ratelimit-used': '60',
              'x-ratelimit-resource': 'core',
            },
          },
        ),
      ),
    );
    const limited = await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /GitHub API rate limit exhausted \(60 of 60 requests used, resource core\); it resets at .* \(in \d+ s\)\. Set GITHUB_TOKEN/,
    );
    expect(limited).toContain(new Date(reset * 1000).toISOString());

    server.resetHandlers();
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, () =>
        HttpResponse.json(
          {
            message:
              'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
          },
          { status: 429, headers: { 'retry-after': '60' } },
        ),
      ),
    );
    await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /secondary rate limit .* retry after 60 s/,
    );

    server.resetHandlers();
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, () =>
        HttpResponse.json({ message: 'Resource not accessible by personal access token' }, { status: 403 }),
      ),
    );
    await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /refused access .*\(403 Resource not accessible by personal access token\)\. The token lacks the permission/,
      { token: TOKEN },
    );

    server.resetHandlers();
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, () => new HttpResponse('<html>unicorn</html>', { status: 502 })),
    );
    await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /GitHub failed with 502 .* try again later/,
    );
  });

  it('reports a failing part in place and keeps the rest', async () => {
    pullRequestHandlers(pullJson(), [
      http.get(`${API}${REPO}/commits/${SHA}/check-runs`, () =>
        HttpResponse.json({ message: 'Resource not accessible by integration' }, { status: 403 }),
      ),
    ]);
    const result = await run({ owner: 'octo-org', repo: 'hello-world', number: 1347 }, { token: TOKEN });
    expect(result.checks).toEqual({
      error: expect.stringMatching(
        /refused access to the check runs of pull request octo-org\/hello-world#1347 \(403/,
      ),
    });
    expect(result.files.count).toBe(3);
    expect(result.reviews.decision).toBe('approved');
  });

  it('never lets the token out: not in results, errors or logs, and not to another host on a redirect', async () => {
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, ({ request }) =>
        HttpResponse.json(
          { message: `Bad credentials: ${request.headers.get('authorization')}` },
          { status: 401 },
        ),
      ),
    );
    const message = await failsWith({ owner: 'octo-org', repo: 'hello-world', number: 1347 }, /401/, {
      token: TOKEN,
    });
    expect(message).not.toContain(TOKEN);
    expect(message).toContain('Bearer [redacted]');

    server.resetHandlers();
    pullRequestHandlers(pullJson({ body: `pasted by mistake: ${TOKEN}` }));
    const echoed = await run({ owner: 'octo-org', repo: 'hello-world', number: 1347 }, { token: TOKEN });
    expect(JSON.stringify(echoed)).not.toContain(TOKEN);
    expect(echoed.body).toBe('pasted by mistake: [redacted]');

    server.resetHandlers();
    let leaked = false;
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, () =>
        HttpResponse.redirect('https://collector.example/steal', 302),
      ),
      http.get('https://collector.example/steal', () => {
        leaked = true;
        return HttpResponse.json(pullJson());
      }),
    );
    await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /redirected .* to https:\/\/collector\.example; not followed/,
      {
        token: TOKEN,
      },
    );
    expect(leaked).toBe(false);

    // Through the tool-server app, with its logger capturing every line.
    server.resetHandlers();
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, ({ request }) =>
        HttpResponse.json(
          { message: `Bad credentials ${request.headers.get('authorization')}` },
          { status: 401 },
        ),
      ),
    );
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const app = createToolServerApp({
      registry: createRegistry(gitTools),
      context: await ctxWith({ token: TOKEN }),
      log: createLogger('tool-server', 'trace', sink),
      security: { tokens: [], allowedHosts: [], allowedOrigins: [], listenHost: '127.0.0.1' },
    });
    const res = await app.request('/tools/get_github_pull_request_info', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ owner: 'octo-org', repo: 'hello-world', number: 1347 }),
    });
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({
      success: false,
      error: expect.stringMatching(/rejected GITHUB_TOKEN/),
    });
    expect(text).not.toContain(TOKEN);
    expect(lines.join('')).not.toContain(TOKEN);
  });

  it('follows a same-host redirect (a renamed repository)', async () => {
    server.use(http.get(`${API}/repositories/1296269/pulls/1347`, () => HttpResponse.json(pullJson())));
    pullRequestHandlers(pullJson(), [
      http.get(`${API}${REPO}/pulls/1347`, () =>
        HttpResponse.redirect(`${API}/repositories/1296269/pulls/1347`, 301),
      ),
    ]);
    const result = await run({ owner: 'octo-org', repo: 'hello-world', number: 1347 }, { token: TOKEN });
    expect(result.title).toBe('Amazing new feature');
    expect(seen.find((r) => r.url.includes('/repositories/'))?.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it('stops a request that does not answer within the timeout', async () => {
    server.use(
      http.get(`${API}${REPO}/pulls/1347`, async () => {
        await delay('infinite');
        return HttpResponse.json({});
      }),
    );
    await failsWith(
      { owner: 'octo-org', repo: 'hello-world', number: 1347 },
      /did not answer within 200 ms/,
      {
        timeoutMs: 200,
      },
    );
  });

  it('refuses unusable arguments with what is expected', async () => {
    await failsWith({}, /Give the pull request: url, or all of owner, repo and number/);
    await failsWith({ owner: 'octo-org', repo: 'hello-world' }, /all of owner, repo and number/);
    await failsWith(
      { url: 'https://github.com/a/b/pull/1', owner: 'a', repo: 'b', number: 1 },
      /either url, or owner, repo and number; not both/,
    );
    await failsWith(
      { url: 'not a url' },
      /is not a URL; give e\.g\. https:\/\/github\.com\/OWNER\/REPO\/pull\/123/,
    );
    await failsWith({ url: 'https://gitlab.com/a/b/pull/1' }, /gitlab\.com is not a GitHub host/);
    await failsWith({ url: 'https://github.com/a/b/issues/1' }, /is not a pull request URL/);
    await failsWith({ url: 'https://github.com/a%2F..%2Fx/b/pull/1' }, /not the expected shape/);
    await expect(run({ owner: '../etc', repo: 'b', number: 1 })).rejects.toThrow(/owner: /);
    await expect(run({ owner: 'a', repo: '..', number: 1 })).rejects.toThrow(/repo: /);
    expect(seen).toEqual([]);
  });

  it('reads GITHUB_TOKEN and GITHUB_API_URL from config, refusing a non-http API URL', () => {
    const config = loadConfig({ GITHUB_TOKEN: TOKEN, GITHUB_API_URL: 'https://ghe.example.com/api/v3' });
    expect(config.tools.github).toMatchObject({ apiUrl: 'https://ghe.example.com/api/v3', token: TOKEN });
    expect(loadConfig({}).tools.github).toMatchObject({ apiUrl: 'https://api.github.com', token: undefined });
    expect(() => loadConfig({ GITHUB_API_URL: 'file:///etc/passwd' })).toThrow(
      /GITHUB_API_URL: must be an http\(s\) URL/,
    );
  });

  it('accepts pull request URLs of the configured Enterprise host', async () => {
    const ghe = 'https://ghe.example.com/api/v3';
    server.use(
      http.get(`${ghe}/repos/team/app/pulls/7`, () =>
        HttpResponse.json(pullJson({ number: 7, html_url: 'https://ghe.example.com/team/app/pull/7' })),
      ),
      http.get(`${ghe}/repos/team/app/pulls/7/files`, () => HttpResponse.json([])),
      http.get(`${ghe}/repos/team/app/pulls/7/reviews`, () => HttpResponse.json([])),
      http.get(`${ghe}/repos/team/app/commits/${SHA}/check-runs`, () =>
        HttpResponse.json({ total_count: 0, check_runs: [] }),
      ),
      http.get(`${ghe}/repos/team/app/commits/${SHA}/status`, () =>
        HttpResponse.json(combinedStatusJson('pending', [])),
      ),
    );
    const result = await run({ url: 'https://ghe.example.com/team/app/pull/7' }, { apiUrl: ghe });
    expect(result).toMatchObject({ owner: 'team', repo: 'app', number: 7, files: { count: 0 } });
  });
});
