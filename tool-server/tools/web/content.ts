import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import TurndownService from 'turndown';
import { ToolError } from '../../kit/errors.ts';

// What fetch_url makes of a body: HTML becomes readable markdown (Readability picks the main content, turndown
// writes it), JSON and other text pass through decoded, anything else is refused by its content type.

/** How a body is handled, decided from its content type (or, without one, from its first bytes). */
export type BodyKind = 'html' | 'text' | 'binary' | 'unknown';

const TEXT_TYPES = new Set([
  'application/json',
  'application/xml',
  'application/javascript',
  'application/ecmascript',
  'application/x-javascript',
  'application/yaml',
  'application/x-yaml',
  'application/toml',
  'application/x-ndjson',
  'application/sql',
  'application/graphql',
  'application/x-sh',
  'application/x-httpd-php',
]);

/** The media type without parameters, lower case ("" when there is none). */
export function mediaType(contentType: string): string {
  return contentType.split(';')[0].trim().toLowerCase();
}

/** Classifies a content type; text/*, JSON, XML and a few script/data types are text. */
export function kindOf(contentType: string): BodyKind {
  const mime = mediaType(contentType);
  if (mime === '') return 'unknown';
  if (mime === 'text/html' || mime === 'application/xhtml+xml') return 'html';
  if (mime.startsWith('text/') || TEXT_TYPES.has(mime)) return 'text';
  if (mime.endsWith('+json') || mime.endsWith('+xml')) return 'text';
  return 'binary';
}

/** Refuses a binary content type before its body is downloaded. */
export function refuseBinary(contentType: string): void {
  if (kindOf(contentType) !== 'binary') return;
  throw new ToolError(
    `The response is ${mediaType(contentType)}, which is binary; fetch_url returns HTML (as markdown), JSON and other text only`,
  );
}

/** Decodes a body: BOM, then the header's charset, then (HTML) a <meta charset>; UTF-8 when none is usable. */
export function decodeBody(body: Uint8Array, contentType: string, kind: BodyKind): string {
  const label =
    bomCharset(body) ?? charsetParam(contentType) ?? (kind !== 'text' ? metaCharset(body) : undefined);
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(label ?? 'utf-8');
  } catch {
    decoder = new TextDecoder('utf-8');
  }
  return decoder.decode(body);
}

/** A byte-order mark decides the encoding before any label does (as browsers do). */
function bomCharset(body: Uint8Array): string | undefined {
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) return 'utf-8';
  if (body[0] === 0xfe && body[1] === 0xff) return 'utf-16be';
  if (body[0] === 0xff && body[1] === 0xfe) return 'utf-16le';
  return undefined;
}

function charsetParam(contentType: string): string | undefined {
  const m = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType);
  return m?.[1];
}

function metaCharset(body: Uint8Array): string | undefined {
  const head = Buffer.from(body.subarray(0, 2048)).toString('latin1');
  return /<meta[^>]+charset\s*=\s*["']?([\w-]+)/i.exec(head)?.[1];
}

/** Settles a body without a content type: NUL bytes mean binary, an HTML start means HTML, else text. */
export function sniffKind(body: Uint8Array): Exclude<BodyKind, 'unknown'> {
  const head = body.subarray(0, 8192);
  if (head.includes(0)) return 'binary';
  const start = Buffer.from(head.subarray(0, 512)).toString('latin1').trimStart().toLowerCase();
  return start.startsWith('<!doctype html') || start.startsWith('<html') ? 'html' : 'text';
}

/** The title and main content of an HTML page as markdown; the whole body when no main content is found. */
export function htmlToMarkdown(html: string, pageUrl: string): { title: string | null; markdown: string } {
  const { document } = parseHTML(html);
  if (!document.querySelector('base[href]') && document.head) {
    // Readability resolves relative links against the document's base: make it the page's own URL.
    const base = document.createElement('base');
    base.setAttribute('href', pageUrl);
    document.head.prepend(base);
  }
  const docTitle = document.title?.trim() || null;
  const turndown = new TurndownService({
    headingStyle: 'atx',
    codeBlockStyle: 'fenced',
    bulletListMarker: '-',
  });
  turndown.remove(['script', 'style', 'noscript', 'template', 'iframe', 'object', 'embed']);
  let article: ReturnType<Readability['parse']> = null;
  try {
    article = new Readability(document as unknown as Document).parse();
  } catch {
    // Readability gives up on some malformed pages; the fallback below still yields the page's text.
  }
  if (article?.content && (article.textContent ?? '').trim() !== '') {
    return { title: article.title?.trim() || docTitle, markdown: tidy(turndown.turndown(article.content)) };
  }
  const fallback = parseHTML(html).document;
  const body = fallback.body?.innerHTML ?? html;
  return { title: docTitle, markdown: tidy(turndown.turndown(body)) };
}

/** The <title> of an HTML page, or null; only the head is parsed (a whole large page takes seconds). */
export function htmlTitle(html: string): string | null {
  const end = html.search(/<\/head\s*>|<body[\s>]/i);
  const head = html.slice(0, end === -1 ? 64 * 1024 : Math.min(end, 256 * 1024));
  return parseHTML(`${head}</head><body></body></html>`).document.title?.trim() || null;
}

function tidy(markdown: string): string {
  return markdown.replace(/\n{3,}/g, '\n\n').trim();
}

/** One window of a long text: `[start, start+max)`, never splitting a surrogate pair. */
export function windowOf(text: string, start: number, max: number): { part: string; end: number } {
  if (start > text.length) {
    throw new ToolError(
      `start_index ${start} is past the end of the content (${text.length} characters); use a smaller start_index`,
    );
  }
  let end = Math.min(text.length, start + max);
  const last = text.charCodeAt(end - 1);
  if (end < text.length && end > start && last >= 0xd800 && last <= 0xdbff) end -= 1;
  return { part: text.slice(start, end), end };
}
