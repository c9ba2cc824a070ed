import { parseHTML } from 'linkedom';
import { z } from 'zod';
import { defineTool, READ_ONLY_OPEN_WORLD } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { type WebToolContext, webSettings } from './context.ts';
import { braveFailure, redactKey } from './search-errors.ts';

// web_search: the Brave Search web endpoint, results reduced to what a model reads (rank, title, url, snippet,
// age). The API key travels only in the X-Subscription-Token header; every message is scrubbed of it.

/** Brave's web search endpoint. */
export const BRAVE_SEARCH_URL = 'https://api.search.brave.com/res/v1/web/search';

const SNIPPET_CHARS = 500;
const TITLE_CHARS = 300;

/** The part of Brave's response that web_search reads; everything else in it is ignored. */
const BraveResponse = z.looseObject({
  query: z
    .looseObject({ original: z.string().optional(), more_results_available: z.boolean().optional() })
    .optional(),
  web: z
    .looseObject({
      results: z.array(
        z.looseObject({
          title: z.string().default(''),
          url: z.string(),
          description: z.string().optional(),
          age: z.string().optional(),
        }),
      ),
    })
    .optional(),
});

/** Searches the web with the Brave Search API. */
export const webSearch = defineTool({
  name: 'web_search',
  description:
    'Search the web (Brave Search). Returns {query, results: [{rank, title, url, snippet, age?}], ' +
    'more_results_available}. `rank` counts from 1 across pages. Page with count and offset: offset is in ' +
    'pages of `count` results (offset 1 with count 10 gives results 11-20), at most 9. Snippets are plain text, ' +
    `cut at ${SNIPPET_CHARS} characters with " […]". Use fetch_url to read a result.`,
  input: z.object({
    query: z
      .string()
      .trim()
      .min(1)
      .max(400)
      .describe('What to search for (at most 400 characters and 50 words); search operators like site: work'),
    count: z.number().int().min(1).max(20).optional().describe('Results per page, 1-20 (default 10)'),
    offset: z
      .number()
      .int()
      .min(0)
      .max(9)
      .optional()
      .describe('Which page of `count` results, 0-9 (default 0)'),
    freshness: z
      .string()
      .regex(
        /^(pd|pw|pm|py|\d{4}-\d{2}-\d{2}to\d{4}-\d{2}-\d{2})$/,
        'use pd, pw, pm, py or YYYY-MM-DDtoYYYY-MM-DD',
      )
      .optional()
      .describe('Only pages from the past day (pd), week (pw), month (pm), year (py), or a date range'),
  }),
  output: z.object({
    query: z.string().describe('The query as Brave ran it'),
    results: z.array(
      z.object({
        rank: z.number().describe('Counts from 1 across pages'),
        title: z.string(),
        url: z.string(),
        snippet: z.string().describe('Plain text'),
        age: z.string().optional().describe('How old the page is, as Brave says it'),
      }),
    ),
    more_results_available: z.boolean(),
  }),
  annotations: { title: 'Web search', ...READ_ONLY_OPEN_WORLD },
  async execute(args, ctx: WebToolContext) {
    const web = webSettings(ctx.web);
    const key = web.braveApiKey;
    if (!key) {
      throw new ToolError(
        'web_search is not configured: the tool-server needs a Brave Search API key in BRAVE_API_KEY ' +
          '(create one in the Brave Search API dashboard, then restart the tool-server). fetch_url works without it.',
      );
    }
    const count = args.count ?? 10;
    const offset = args.offset ?? 0;
    const url = new URL(BRAVE_SEARCH_URL);
    url.searchParams.set('q', args.query);
    url.searchParams.set('count', String(count));
    url.searchParams.set('offset', String(offset));
    if (args.freshness) url.searchParams.set('freshness', args.freshness);

    let res: Response;
    try {
      res = await web.searchFetch(url, {
        headers: { accept: 'application/json', 'x-subscription-token': key },
        signal: AbortSignal.timeout(web.searchTimeoutMs),
      });
    } catch (err) {
      const e = err as Error;
      if (e.name === 'TimeoutError' || e.name === 'AbortError') {
        throw new ToolError(`Brave Search did not answer within ${web.searchTimeoutMs} ms; try again`);
      }
      const cause = (e as { cause?: Error }).cause?.message;
      throw new ToolError(redactKey(`Could not reach Brave Search: ${cause ?? e.message}`, key));
    }
    if (!res.ok) throw await braveFailure(res, key);

    let body: z.output<typeof BraveResponse>;
    try {
      body = BraveResponse.parse(await res.json());
    } catch {
      throw new ToolError(`Brave Search answered HTTP ${res.status} with a body that is not its search JSON`);
    }
    const results = (body.web?.results ?? []).map((r, i) => ({
      rank: offset * count + i + 1,
      title: capped(plain(r.title), TITLE_CHARS),
      url: r.url,
      snippet: capped(plain(r.description ?? ''), SNIPPET_CHARS),
      ...(r.age ? { age: r.age } : {}),
    }));
    return {
      query: body.query?.original ?? args.query,
      results,
      more_results_available: body.query?.more_results_available ?? false,
    };
  },
});

/** Brave marks matches with <strong> and escapes entities: the text a reader sees. */
function plain(html: string): string {
  if (!/[<&]/.test(html)) return html;
  const { document } = parseHTML(`<!doctype html><html><body><p>${html}</p></body></html>`);
  return (document.body?.textContent ?? html).replace(/\s+/g, ' ').trim();
}

function capped(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)} […]` : text;
}
