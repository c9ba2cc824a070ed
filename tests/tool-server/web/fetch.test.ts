import type { ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ToolError, ToolInputError } from '../../../tool-server/kit/errors.ts';
import { fetchUrl } from '../../../tool-server/tools/web/fetch.ts';
import { type LocalServer, localServer, tableResolver, webContext } from '../../helpers/web-servers.ts';

// fetch_url against real loopback servers (allow-listed by host:port, as FETCH_ALLOW_HOSTS would): what the
// model gets back for each kind of page, and how the byte cap and the deadline bound a hostile body.

let servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function site(handler?: Parameters<typeof localServer>[0]) {
  const s = await localServer(handler);
  servers.push(s);
  return s;
}

async function ctxFor(s: LocalServer, web: Parameters<typeof webContext>[0] = {}) {
  return webContext({ allow: [`127.0.0.1:${s.port}`], ...web });
}

async function run(args: Record<string, unknown>, ctx: Awaited<ReturnType<typeof webContext>>): Promise<any> {
  return fetchUrl.run(args, ctx);
}

async function failure(args: Record<string, unknown>, ctx: Awaited<ReturnType<typeof webContext>>) {
  const err = await run(args, ctx).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  return (err as Error).message;
}

const ARTICLE = `<!doctype html><html><head><title>Kettles of the world</title></head><body>
<nav><a href="/">Home</a> | <a href="/shop">Shop</a> | Sign in</nav>
<main><article><h1>Kettles of the world</h1>
<p>The stovetop kettle is older than the electric one. ${'It whistles when the water boils. '.repeat(12)}</p>
<p>Read the <a href="/history/kettles">full history</a> or the <a href="https://other.test/x">other site</a>.</p>
<p>${'Copper conducts heat well, so copper kettles boil quickly. '.repeat(10)}</p>
</article></main>
<footer>© Kettle Corp — cookie settings</footer><script>track()</script></body></html>`;

function html(res: ServerResponse, body: string, status = 200) {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' });
  res.end(body);
}

describe('what comes back', () => {
  it('HTML becomes markdown of the main content, with the title and absolute links', async () => {
    const s = await site((_req, res) => html(res, ARTICLE));
    const r = await run({ url: `${s.origin}/kettles` }, await ctxFor(s));
    expect(r).toMatchObject({
      url: `${s.origin}/kettles`,
      final_url: `${s.origin}/kettles`,
      redirects: [],
      status: 200,
      content_type: 'text/html',
      title: 'Kettles of the world',
      truncated: false,
      bytes: Buffer.byteLength(ARTICLE),
      start_index: 0,
    });
    expect(r.text).toBeUndefined();
    expect(r.markdown).toContain('The stovetop kettle is older than the electric one.');
    expect(r.markdown).toContain(`[full history](${s.origin}/history/kettles)`);
    expect(r.markdown).toContain('[other site](https://other.test/x)');
    expect(r.markdown).not.toMatch(/Sign in|cookie settings|track\(\)|<p>/);
    expect(r.total_chars).toBe(r.markdown.length);
  });

  it('raw: true returns the HTML source as text', async () => {
    const s = await site((_req, res) => html(res, ARTICLE));
    const r = await run({ url: s.origin, raw: true }, await ctxFor(s));
    expect(r.text).toBe(ARTICLE);
    expect(r.markdown).toBeUndefined();
    expect(r.title).toBe('Kettles of the world');
  });

  it('JSON and plain text pass through unchanged; a declared charset is decoded', async () => {
    const json = '{"items":[1,2,3],"name":"kettle"}';
    const s = await site((req, res) => {
      if (req.url === '/data') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(json);
      }
      if (req.url === '/problem') {
        res.writeHead(400, { 'content-type': 'application/problem+json' });
        return res.end('{"title":"bad"}');
      }
      res.writeHead(200, { 'content-type': 'text/plain; charset=iso-8859-1' });
      res.end(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    });
    const ctx = await ctxFor(s);
    expect(await run({ url: `${s.origin}/data` }, ctx)).toMatchObject({
      text: json,
      content_type: 'application/json',
      title: null,
    });
    expect(await run({ url: `${s.origin}/problem` }, ctx)).toMatchObject({
      status: 400,
      text: '{"title":"bad"}',
    });
    expect(await run({ url: `${s.origin}/latin1` }, ctx)).toMatchObject({ text: 'café\n', bytes: 5 });
  });

  it('a byte-order mark wins over the header, and HTML without a header charset uses its <meta charset>', async () => {
    const s = await site((req, res) => {
      if (req.url === '/bom') {
        res.writeHead(200, { 'content-type': 'text/plain; charset=iso-8859-1' });
        return res.end(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('thé vert', 'utf16le')]));
      }
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        Buffer.concat([
          Buffer.from('<html><head><meta charset="windows-1252"><title>Caf'),
          Buffer.from([0xe9]),
          Buffer.from('</title></head><body><p>na'),
          Buffer.from([0xef]),
          Buffer.from('ve</p></body></html>'),
        ]),
      );
    });
    const ctx = await ctxFor(s);
    expect(await run({ url: `${s.origin}/bom` }, ctx)).toMatchObject({ text: 'thé vert' });
    expect(await run({ url: `${s.origin}/meta` }, ctx)).toMatchObject({ title: 'Café', markdown: 'naïve' });
  });

  it('an error page is a result with its status, not a failure', async () => {
    const s = await site((_req, res) =>
      html(res, '<html><head><title>Not here</title></head><body><p>No such kettle.</p></body></html>', 404),
    );
    const r = await run({ url: `${s.origin}/missing` }, await ctxFor(s));
    expect(r).toMatchObject({ status: 404, title: 'Not here' });
    expect(r.markdown).toContain('No such kettle.');
  });

  it('refuses binary content by its type, and sniffs a body that has no type', async () => {
    const s = await site((req, res) => {
      if (req.url === '/png') {
        res.writeHead(200, { 'content-type': 'image/png' });
        return res.end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]));
      }
      if (req.url === '/pdf') {
        res.writeHead(200, { 'content-type': 'application/pdf' });
        return res.end('%PDF-1.7');
      }
      res.removeHeader('content-type');
      res.writeHead(200);
      res.end(
        req.url === '/untyped-binary'
          ? Buffer.from([1, 2, 0, 3])
          : '<!DOCTYPE html><html><body><p>typed by its first bytes</p></body></html>',
      );
    });
    const ctx = await ctxFor(s);
    expect(await failure({ url: `${s.origin}/png` }, ctx)).toMatch(
      /image\/png, which is binary; fetch_url returns HTML \(as markdown\), JSON and other text only/,
    );
    expect(await failure({ url: `${s.origin}/pdf` }, ctx)).toMatch(/application\/pdf, which is binary/);
    expect(await failure({ url: `${s.origin}/untyped-binary` }, ctx)).toMatch(/binary/);
    const sniffed = await run({ url: `${s.origin}/untyped-html` }, ctx);
    expect(sniffed.markdown).toBe('typed by its first bytes');
    expect(sniffed.content_type).toBeNull();
  });

  it('cuts long content at max_chars with a marker, and start_index continues it', async () => {
    const body = `${'a'.repeat(20_000)}${'b'.repeat(5_000)}`;
    const s = await site((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(body);
    });
    const ctx = await ctxFor(s);
    const first = await run({ url: s.origin }, ctx);
    expect(first).toMatchObject({
      truncated: true,
      total_chars: 25_000,
      start_index: 0,
      next_start_index: 20_000,
    });
    expect(first.text).toBe(
      `${'a'.repeat(20_000)}\n\n[truncated: showed characters 0-20000 of 25000; call fetch_url again with start_index: 20000 for more]`,
    );
    const rest = await run({ url: s.origin, start_index: 20_000 }, ctx);
    expect(rest).toMatchObject({ text: 'b'.repeat(5_000), truncated: false, start_index: 20_000 });
    expect(rest.next_start_index).toBeUndefined();
    const small = await run({ url: s.origin, max_chars: 100, start_index: 19_950 }, ctx);
    expect(small.text.split('\n')[0]).toBe(`${'a'.repeat(50)}${'b'.repeat(50)}`);
    expect(await failure({ url: s.origin, start_index: 30_000 }, ctx)).toMatch(
      /start_index 30000 is past the end of the content \(25000 characters\)/,
    );
  });

  it('rejects malformed arguments as input errors naming the field', async () => {
    const ctx = await webContext();
    for (const args of [
      {},
      { url: '' },
      { url: 'http://x.test', max_chars: 5 },
      { url: 'http://x.test', start_index: -1 },
    ]) {
      await expect(fetchUrl.run(args, ctx)).rejects.toBeInstanceOf(ToolInputError);
    }
    await expect(fetchUrl.run({ url: 'http://x.test', max_chars: 5 }, ctx)).rejects.toThrow(/max_chars/);
  });

  it('says plainly when nothing listens', async () => {
    const s = await site();
    const ctx = await ctxFor(s);
    await s.close();
    servers = [];
    expect(await failure({ url: `${s.origin}/` }, ctx)).toMatch(
      new RegExp(`Could not fetch ${s.origin}/: connection refused`),
    );
  });
});

describe('byte cap and deadline against hostile bodies', () => {
  let bomb: Buffer;
  let nested: Buffer;
  const DECODED = 64 * 1024 * 1024;
  beforeAll(() => {
    bomb = gzipSync(Buffer.alloc(DECODED, 'a'), { level: 9 });
    nested = gzipSync(bomb, { level: 9 });
  });

  it('an endless body stops at the cap: the result is cut and the server sees its response closed', async () => {
    let written = 0;
    let closed!: () => void;
    const serverSawClose = new Promise<void>((resolve) => {
      closed = resolve;
    });
    const s = await site((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(16 * 1024, 'x');
      let open = true;
      res.on('close', () => {
        open = false;
        closed();
      });
      const pump = () => {
        while (open && res.write(chunk)) written += chunk.length;
        if (open) res.once('drain', pump);
      };
      pump();
    });
    const cap = 256 * 1024;
    const r = await run({ url: s.origin, max_chars: 100 }, await ctxFor(s, { fetchMaxBytes: cap }));
    expect(r).toMatchObject({ bytes: cap, truncated: true, cut_by: 'max_bytes', total_chars: cap });
    expect(r.text).toContain(
      `[truncated: the download stopped at the ${cap}-byte cap; the document is longer than this]`,
    );
    await serverSawClose;
    expect(written).toBeLessThan(64 * cap);
  });

  it.each([
    ['gzip', () => bomb],
    ['gzip, gzip', () => nested],
  ])('a %s bomb is cut at the cap counted after decoding', async (encoding, body) => {
    const s = await site((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': encoding });
      res.end(body());
    });
    const cap = 1024 * 1024;
    const r = await run({ url: s.origin, max_chars: 1000 }, await ctxFor(s, { fetchMaxBytes: cap }));
    expect(body().length).toBeLessThan(cap / 10);
    expect(r).toMatchObject({ bytes: cap, truncated: true, cut_by: 'max_bytes', total_chars: cap });
    expect(r.text.startsWith('a'.repeat(1000))).toBe(true);
  });

  it('a body that stalls is returned as far as it came when the deadline passes', async () => {
    const s = await site((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('the first part arrived');
    });
    const r = await run({ url: s.origin }, await ctxFor(s, { fetchTimeoutMs: 400 }));
    expect(r).toMatchObject({ truncated: true, cut_by: 'deadline', bytes: 22 });
    expect(r.text).toBe(
      'the first part arrived\n\n[truncated: the 400 ms deadline passed while downloading; this is the part received]',
    );
  });

  it('a server that never answers, or a resolver that never does, fails at the deadline', async () => {
    const s = await site(() => {
      // Never responds.
    });
    expect(await failure({ url: `${s.origin}/slow` }, await ctxFor(s, { fetchTimeoutMs: 300 }))).toMatch(
      new RegExp(`No response from ${s.origin}/slow within 300 ms \\(the fetch deadline\\)`),
    );
    const hanging = { resolve: () => new Promise<never>(() => {}) };
    expect(
      await failure({ url: 'http://tarpit.test/' }, await webContext({ ...hanging, fetchTimeoutMs: 300 })),
    ).toMatch(/No response from http:\/\/tarpit\.test\/ within 300 ms/);
  });

  it('the deadline covers the whole redirect chain', async () => {
    const s = await site((req, res) => {
      if (req.url === '/stall') return;
      res.writeHead(302, { location: '/stall' });
      res.end();
    });
    expect(await failure({ url: `${s.origin}/go` }, await ctxFor(s, { fetchTimeoutMs: 300 }))).toMatch(
      /\/stall within 300 ms/,
    );
    expect(s.hits).toEqual(['GET /go', 'GET /stall']);
  });

  it('a name resolved through the injected resolver reaches an allow-listed server', async () => {
    const s = await site((_req, res) => html(res, '<html><body><p>named</p></body></html>'));
    const { resolve } = tableResolver({ 'docs.test': ['127.0.0.1'] });
    const r = await run(
      { url: `http://docs.test:${s.port}/` },
      await webContext({ allow: ['docs.test'], resolve }),
    );
    expect(r.markdown).toBe('named');
  });
});
