import { z } from 'zod';
import { guardedFetch } from '../../guards/net/guarded-fetch.ts';
import { defineTool, READ_ONLY_OPEN_WORLD } from '../../kit/define.ts';
import { decodeBody, htmlTitle, kindOf, mediaType, refuseBinary, sniffKind, windowOf } from './content.ts';
import { WEB_DEFAULTS, type WebToolContext, webSettings } from './context.ts';

// fetch_url: one page from the public web as markdown or text, under the SSRF guard (tool-server/guards/net/).

const DEFAULT_CHARS = 20_000;
const MAX_CHARS = 100_000;

/** GETs a public http(s) URL and returns its main content as markdown (HTML) or text (JSON and other text). */
export const fetchUrl = defineTool({
  name: 'fetch_url',
  description:
    'Fetch a public web page or text document with GET. Returns {url, final_url, redirects, status, ' +
    'content_type, title, markdown | text, truncated, bytes, total_chars, start_index, next_start_index?}. ' +
    'HTML comes back as `markdown` of its main content (navigation and ads dropped; raw: true gives the HTML ' +
    'source as `text`); JSON and other text come back as `text`, unchanged. Binary types (images, PDF, ' +
    'archives) are refused. `status` is the final HTTP status: a 404 page is returned, not an error. Long ' +
    'content is cut at max_chars with a marker line; `truncated` is true whenever the text shown is not all ' +
    'of it, and `next_start_index` says where to continue. Only public addresses are reachable: private, ' +
    'loopback, link-local and metadata addresses are refused, as are redirects to them, URLs with ' +
    'credentials, and https-to-http redirects. At most 5 redirects are followed.',
  input: z.object({
    url: z.string().min(1).max(8192).describe('An absolute http:// or https:// URL'),
    max_chars: z
      .number()
      .int()
      .min(100)
      .max(MAX_CHARS)
      .optional()
      .describe(`Most characters of content to return (default ${DEFAULT_CHARS})`),
    start_index: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe('Character offset to start from, to continue a truncated result (default 0)'),
    raw: z
      .boolean()
      .optional()
      .describe('Return HTML as its source text instead of converting it to markdown'),
  }),
  output: z.object({
    url: z.string(),
    final_url: z.string().describe('Where the redirects led'),
    redirects: z.array(z.string()).describe('Each URL redirected to, in order'),
    status: z.number().describe('The final HTTP status'),
    content_type: z.string().nullable(),
    title: z.string().nullable(),
    markdown: z.string().optional().describe("An HTML page's main content (not with raw)"),
    text: z.string().optional().describe('Any other text, or the HTML source with raw'),
    truncated: z.boolean(),
    cut_by: z
      .enum(['max_bytes', 'deadline'])
      .optional()
      .describe('What stopped the download before the end of the document'),
    bytes: z.number().describe('Bytes downloaded'),
    total_chars: z.number().describe('Characters of the whole content'),
    start_index: z.number(),
    next_start_index: z.number().optional().describe('Where to continue a truncated result'),
  }),
  annotations: { title: 'Fetch URL', ...READ_ONLY_OPEN_WORLD },
  async execute(args, ctx: WebToolContext) {
    const web = webSettings(ctx.web);
    const started = Date.now();
    const page = await guardedFetch(args.url, {
      resolve: web.resolve,
      allow: web.allow,
      timeoutMs: web.fetchTimeoutMs,
      maxBytes: web.fetchMaxBytes,
      maxRedirects: WEB_DEFAULTS.maxRedirects,
      userAgent: WEB_DEFAULTS.userAgent,
      proxy: web.proxy,
      accept: refuseBinary,
    });
    let kind = kindOf(page.contentType);
    if (kind === 'unknown') kind = sniffKind(page.body);
    if (kind === 'binary') refuseBinary('application/octet-stream');
    const decoded = decodeBody(page.body, page.contentType, kind);
    const asMarkdown = kind === 'html' && !args.raw;
    // Conversion gets what is left of the deadline, but at least a quarter of it (a body cut by the deadline
    // still deserves its markdown).
    const budget = Math.max(web.fetchTimeoutMs - (Date.now() - started), web.fetchTimeoutMs / 4);
    const converted = asMarkdown
      ? await web.converter.toMarkdown(decoded, page.finalUrl, budget, ctx.session)
      : undefined;
    const title = converted ? converted.title : kind === 'html' ? htmlTitle(decoded) : null;
    const content = converted?.markdown ?? decoded;

    const start = args.start_index ?? 0;
    const { part, end } = windowOf(content, start, args.max_chars ?? DEFAULT_CHARS);
    const markers: string[] = [];
    if (end < content.length) {
      markers.push(
        `[truncated: showed characters ${start}-${end} of ${content.length}; call fetch_url again with start_index: ${end} for more]`,
      );
    }
    if (page.cut === 'max_bytes') {
      markers.push(
        `[truncated: the download stopped at the ${web.fetchMaxBytes}-byte cap; the document is longer than this]`,
      );
    }
    if (page.cut === 'deadline') {
      markers.push(
        `[truncated: the ${web.fetchTimeoutMs} ms deadline passed while downloading; this is the part received]`,
      );
    }
    const shown = markers.length > 0 ? `${part}\n\n${markers.join('\n')}` : part;
    return {
      url: page.url,
      final_url: page.finalUrl,
      redirects: page.redirects,
      status: page.status,
      content_type: mediaType(page.contentType) || null,
      title,
      ...(asMarkdown ? { markdown: shown } : { text: shown }),
      truncated: markers.length > 0,
      ...(page.cut ? { cut_by: page.cut } : {}),
      bytes: page.body.byteLength,
      total_chars: content.length,
      start_index: start,
      ...(end < content.length ? { next_start_index: end } : {}),
    };
  },
});
