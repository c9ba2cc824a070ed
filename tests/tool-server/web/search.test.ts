import { Writable } from 'node:stream';
import { HttpResponse, http } from 'msw';
import { setupServer } from 'msw/node';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Security } from '../../../lib/http/security.ts';
import { createToolServerApp } from '../../../tool-server/app.ts';
import { ToolError, ToolInputError } from '../../../tool-server/kit/errors.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import { BRAVE_SEARCH_URL, webSearch } from '../../../tool-server/tools/web/search.ts';
import { retryAfterSeconds } from '../../../tool-server/tools/web/search-errors.ts';
import { webTools } from '../../../tool-server/tools/web/tools.ts';
import { webContext } from '../../helpers/web-servers.ts';

// web_search against Brave's API mocked at the HTTP edge with msw, answering with the shapes Brave sends:
// the search JSON (query, mixed, web.results with HTML-marked descriptions) and its ErrorResponse bodies.

const KEY = 'BSA-test-key-3f9a1c77d2e04b6b';
const requests: Request[] = [];
const edge = setupServer();

beforeAll(() =>
  edge.listen({
    onUnhandledRequest(request, print) {
      const host = new URL(request.url).hostname;
      if (host !== '127.0.0.1' && host !== 'localhost') print.error();
    },
  }),
);
afterEach(() => {
  edge.resetHandlers();
  requests.length = 0;
});
afterAll(() => edge.close());

/** A Brave web-search answer as the API sends it (fields web_search ignores included). */
function braveResults(query: string, results: Array<Record<string, unknown>>, more = true) {
  return {
    type: 'search',
    query: {
      original: query,
      show_strict_warning: false,
      is_navigational: false,
      is_news_breaking: false,
      spellcheck_off: true,
      country: 'us',
      bad_results: false,
      should_fallback: false,
      postal_code: '',
      city: '',
      header_country: '',
      more_results_available: more,
      state: '',
    },
    mixed: {
      type: 'mixed',
      main: results.map((_, index) => ({ type: 'web', index, all: false })),
      top: [],
      side: [],
    },
    web: {
      type: 'search',
      family_friendly: true,
      results: results.map((r) => ({
        type: 'search_result',
        subtype: 'generic',
        is_source_local: false,
        is_source_both: false,
        is_live: false,
        language: 'en',
        family_friendly: true,
        profile: {
          name: 'Example',
          url: r.url,
          long_name: 'example.org',
          img: 'https://imgs.search.brave.com/x.png',
        },
        meta_url: {
          scheme: 'https',
          netloc: 'example.org',
          hostname: 'example.org',
          favicon: '',
          path: '› kettles',
        },
        ...r,
      })),
    },
  };
}

/** Brave's error body: {"type": "ErrorResponse", "error": {...}, "time": ...}. */
function braveError(status: number, code: string, detail: string, meta: Record<string, unknown> = {}) {
  return {
    type: 'ErrorResponse',
    error: { id: '5d832250-9396-4f6e-b84a-2a1fe524cd7d', status, code, detail, meta },
    time: 1_700_000_000,
  };
}

function answer(status: number, body: unknown, headers: Record<string, string> = {}) {
  edge.use(
    http.get(BRAVE_SEARCH_URL, ({ request }) => {
      requests.push(request.clone());
      return HttpResponse.json(body as Record<string, unknown>, { status, headers });
    }),
  );
}

/** Runs web_search with the key, or with none configured when `key` is null. */
async function search(args: Record<string, unknown>, key: string | null = KEY): Promise<any> {
  return webSearch.run(args, await webContext({ braveApiKey: key ?? undefined }));
}

async function searchError(args: Record<string, unknown>, key: string | null = KEY): Promise<string> {
  const err = await search(args, key).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  const message = (err as Error).message;
  expect(message).not.toContain(KEY);
  return message;
}

describe('web_search results', () => {
  it('sends the query with the key in its header and returns ranked plain-text results', async () => {
    answer(
      200,
      braveResults('kettle history', [
        {
          title: 'History of the <strong>kettle</strong>',
          url: 'https://example.org/kettles',
          description: 'The <strong>kettle</strong> &amp; its whistle: &#x27;a short history&#x27;.',
          age: 'May 1, 2024',
          page_age: '2024-05-01T10:00:00',
        },
        { title: 'Copper kettles', url: 'https://example.org/copper', description: 'Why copper boils fast.' },
      ]),
    );
    const r = await search({ query: 'kettle history' });
    expect(r).toEqual({
      query: 'kettle history',
      results: [
        {
          rank: 1,
          title: 'History of the kettle',
          url: 'https://example.org/kettles',
          snippet: "The kettle & its whistle: 'a short history'.",
          age: 'May 1, 2024',
        },
        {
          rank: 2,
          title: 'Copper kettles',
          url: 'https://example.org/copper',
          snippet: 'Why copper boils fast.',
        },
      ],
      more_results_available: true,
    });
    expect(requests).toHaveLength(1);
    const sent = new URL(requests[0].url);
    expect(Object.fromEntries(sent.searchParams)).toEqual({ q: 'kettle history', count: '10', offset: '0' });
    expect(requests[0].headers.get('x-subscription-token')).toBe(KEY);
    expect(requests[0].headers.get('accept')).toBe('application/json');
    expect(requests[0].url).not.toContain(KEY);
    expect(JSON.stringify(r)).not.toContain(KEY);
  });

  it('pages with count and offset, ranks across pages, and passes freshness', async () => {
    const five = Array.from({ length: 5 }, (_, i) => ({
      title: `R${i}`,
      url: `https://example.org/${i}`,
      description: 'd',
    }));
    answer(200, braveResults('tea', five, false));
    const r = await search({ query: 'tea', count: 5, offset: 2, freshness: 'pw' });
    expect(r.results.map((x: { rank: number }) => x.rank)).toEqual([11, 12, 13, 14, 15]);
    expect(r.more_results_available).toBe(false);
    expect(Object.fromEntries(new URL(requests[0].url).searchParams)).toEqual({
      q: 'tea',
      count: '5',
      offset: '2',
      freshness: 'pw',
    });
  });

  it('returns an empty list when Brave has no web results, and caps long snippets with a marker', async () => {
    answer(200, {
      type: 'search',
      query: { original: 'zzqx', more_results_available: false },
      mixed: { type: 'mixed', main: [] },
    });
    expect(await search({ query: 'zzqx' })).toEqual({
      query: 'zzqx',
      results: [],
      more_results_available: false,
    });
    edge.resetHandlers();
    answer(
      200,
      braveResults('long', [{ title: 'L', url: 'https://example.org/l', description: 'word '.repeat(300) }]),
    );
    const [only] = (await search({ query: 'long' })).results;
    expect(only.snippet).toHaveLength(500 + ' […]'.length);
    expect(only.snippet.endsWith(' […]')).toBe(true);
  });

  it('refuses bad arguments before calling Brave, naming the field', async () => {
    answer(200, braveResults('x', []));
    for (const args of [
      {},
      { query: '' },
      { query: 'x'.repeat(401) },
      { query: 'x', count: 21 },
      { query: 'x', offset: 10 },
      { query: 'x', freshness: 'yesterday' },
    ]) {
      await expect(search(args)).rejects.toBeInstanceOf(ToolInputError);
    }
    await expect(search({ query: 'x', offset: 10 })).rejects.toThrow(/offset/);
    expect(requests).toHaveLength(0);
  });
});

describe('web_search errors the model can act on', () => {
  it('without a key it says which variable to set, and calls nothing', async () => {
    answer(200, braveResults('x', []));
    expect(await searchError({ query: 'x' }, null)).toMatch(/needs a Brave Search API key in BRAVE_API_KEY/);
    expect(requests).toHaveLength(0);
  });

  it('401 and 422 SUBSCRIPTION_TOKEN_INVALID: the key is wrong, retrying will not help', async () => {
    answer(
      401,
      braveError(401, 'SUBSCRIPTION_TOKEN_INVALID', 'The provided subscription token is invalid.', {
        component: 'authentication',
      }),
    );
    expect(await searchError({ query: 'x' })).toBe(
      "Brave Search rejected the API key (HTTP 401 SUBSCRIPTION_TOKEN_INVALID: The provided subscription token is invalid.). Check BRAVE_API_KEY in the tool-server's environment; retrying with the same key will not help.",
    );
    edge.resetHandlers();
    answer(
      422,
      braveError(422, 'SUBSCRIPTION_TOKEN_INVALID', 'The provided subscription token is invalid.', {
        component: 'authentication',
      }),
    );
    expect(await searchError({ query: 'x' })).toMatch(
      /rejected the API key \(HTTP 422 SUBSCRIPTION_TOKEN_INVALID/,
    );
  });

  it('422 VALIDATION names the fields Brave refused', async () => {
    answer(
      422,
      braveError(422, 'VALIDATION', 'Unable to validate request parameter(s)', {
        errors: [
          {
            type: 'less_than_equal',
            loc: ['query', 'count'],
            msg: 'Input should be less than or equal to 20',
            input: '50',
            ctx: { le: 20 },
          },
        ],
      }),
    );
    expect(await searchError({ query: 'x' })).toBe(
      'Brave Search refused the request (HTTP 422 VALIDATION: Unable to validate request parameter(s)) [query.count: Input should be less than or equal to 20]. Change the arguments: query 1-400 characters and at most 50 words, count 1-20, offset 0-9.',
    );
  });

  it('429 says when to retry: Retry-After first, else the exhausted window of X-RateLimit-Reset', async () => {
    const limited = braveError(429, 'RATE_LIMITED', 'Request rate limit exceeded for plan.', {
      component: 'rate_limiter',
    });
    answer(429, limited, {
      'retry-after': '2',
      'x-ratelimit-limit': '1, 2000',
      'x-ratelimit-remaining': '0, 1500',
    });
    expect(await searchError({ query: 'x' })).toBe(
      'Brave Search rate limit reached: too many requests (HTTP 429 RATE_LIMITED: Request rate limit exceeded for plan.); retry after 2 s.',
    );
    edge.resetHandlers();
    answer(429, limited, { 'x-ratelimit-reset': '1, 1419704', 'x-ratelimit-remaining': '0, 1500' });
    expect(await searchError({ query: 'x' })).toMatch(/retry after 1 s\.$/);
    edge.resetHandlers();
    const quota = braveError(429, 'QUOTA_LIMITED', 'Request quota limit exceeded for plan.', {
      component: 'rate_limiter',
    });
    answer(429, quota, { 'x-ratelimit-reset': '1, 1419704', 'x-ratelimit-remaining': '1, 0' });
    expect(await searchError({ query: 'x' })).toMatch(
      /the plan's quota is used up .*retry after 1419704 s \(about 16 days\)\./,
    );
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    expect(retryAfterSeconds(new Headers({ 'retry-after': '7' }))).toBe(7);
    expect(retryAfterSeconds(new Headers({ 'retry-after': inAMinute }))).toBeGreaterThan(50);
    expect(retryAfterSeconds(new Headers({}))).toBeUndefined();
  });

  it('5xx, a body that is not Brave JSON, and an unreachable API each get their own message', async () => {
    answer(503, { message: 'upstream down' });
    expect(await searchError({ query: 'x' })).toBe('Brave Search failed (HTTP 503); try again in a moment.');
    edge.resetHandlers();
    edge.use(http.get(BRAVE_SEARCH_URL, () => new HttpResponse('<html>gateway</html>', { status: 200 })));
    expect(await searchError({ query: 'x' })).toMatch(/HTTP 200 with a body that is not its search JSON/);
    edge.resetHandlers();
    edge.use(http.get(BRAVE_SEARCH_URL, () => HttpResponse.error()));
    expect(await searchError({ query: 'x' })).toMatch(/^Could not reach Brave Search/);
  });

  it('scrubs the key even from an upstream message that echoes it', async () => {
    answer(422, braveError(422, 'SUBSCRIPTION_TOKEN_INVALID', `Token ${KEY} is not valid.`));
    const message = await searchError({ query: 'x' });
    expect(message).toContain('Token [redacted] is not valid.');
  });
});

describe('the key through the tool-server', () => {
  it('never appears in a result, an error or a log line', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const security: Security = { tokens: [], allowedHosts: [], allowedOrigins: [], listenHost: '127.0.0.1' };
    const app = createToolServerApp({
      registry: createRegistry(webTools),
      context: await webContext({ braveApiKey: KEY }),
      log: pino({ level: 'trace' }, sink),
      security,
    });
    const call = async (body: unknown) => {
      const res = await app.request('http://127.0.0.1/tools/web_search', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return res.text();
    };
    answer(200, braveResults('kettle', [{ title: 'K', url: 'https://example.org/k', description: 'k' }]));
    const ok = await call({ query: 'kettle' });
    expect(JSON.parse(ok)).toMatchObject({ success: true, result: { results: [{ rank: 1, title: 'K' }] } });
    edge.resetHandlers();
    answer(401, braveError(401, 'SUBSCRIPTION_TOKEN_INVALID', `bad token ${KEY}`));
    const failed = await call({ query: 'kettle' });
    expect(JSON.parse(failed)).toMatchObject({
      success: false,
      error: expect.stringMatching(/rejected the API key/),
    });
    edge.resetHandlers();
    edge.use(http.get(BRAVE_SEARCH_URL, () => HttpResponse.error()));
    const unreachable = await call({ query: 'kettle' });
    const tools = await (await app.request('http://127.0.0.1/tools')).text();
    for (const text of [ok, failed, unreachable, tools, ...lines]) expect(text).not.toContain(KEY);
    expect(requests.every((r) => r.headers.get('x-subscription-token') === KEY)).toBe(true);
  });
});
