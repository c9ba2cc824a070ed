import { afterAll, describe, expect, it } from 'vitest';
import { htmlToMarkdown } from '../../../tool-server/tools/web/content.ts';
import { fetchUrl } from '../../../tool-server/tools/web/fetch.ts';
import { createHtmlConverter } from '../../../tool-server/tools/web/html.ts';
import { localServer, webContext } from '../../helpers/web-servers.ts';

// The tool-server converts HTML in worker threads: the event loop keeps serving while a large page converts,
// and a conversion past its deadline is stopped (its worker terminated) without harming the next one.

const converter = createHtmlConverter(1);
afterAll(() => converter.close());

function page(paragraphs: number): string {
  const p = '<p>Kettles boil water; <a href="/k">copper</a> ones boil it <b>quickly</b>.</p>\n';
  return `<html><head><title>Big</title></head><body><nav>menu</nav><article>${p.repeat(paragraphs)}</article></body></html>`;
}

describe('HTML conversion off the main thread', () => {
  it('gives the same markdown as converting inline, and the event loop runs meanwhile', async () => {
    await converter.toMarkdown('<p>warm up</p>', 'https://a.test/', 60_000);
    const html = page(300);
    let ticks = 0;
    let converting = true;
    const tick = () => {
      ticks += 1;
      if (converting) setImmediate(tick);
    };
    setImmediate(tick);
    const converted = await converter.toMarkdown(html, 'https://a.test/page', 60_000);
    converting = false;
    expect(converted).toEqual(htmlToMarkdown(html, 'https://a.test/page'));
    expect(converted.markdown).toContain('[copper](https://a.test/k)');
    expect(ticks).toBeGreaterThan(1);
  });

  it('stops a conversion past its deadline, and the next one works', async () => {
    await expect(converter.toMarkdown(page(5_000), 'https://a.test/', 150)).rejects.toThrow(
      /took longer than 150 ms and was stopped; call fetch_url again with raw: true/,
    );
    const next = await converter.toMarkdown(
      '<html><body><p>after</p></body></html>',
      'https://a.test/',
      60_000,
    );
    expect(next.markdown).toBe('after');
  });

  it('fetch_url uses the converter from its context, saying whose call it is', async () => {
    const site = await localServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html><head><title>Via worker</title></head><body><p>converted in a worker</p></body></html>');
    });
    try {
      const sessions: (string | undefined)[] = [];
      const noting: typeof converter = {
        toMarkdown: (html, url, timeoutMs, session) => {
          sessions.push(session);
          return converter.toMarkdown(html, url, timeoutMs, session);
        },
        close: () => converter.close(),
      };
      const ctx = {
        ...(await webContext({ allow: [`127.0.0.1:${site.port}`], converter: noting })),
        session: 's1',
      };
      const r = (await fetchUrl.run({ url: site.origin }, ctx)) as { title: string; markdown: string };
      expect(r).toMatchObject({ title: 'Via worker', markdown: 'converted in a worker' });
      expect(sessions).toEqual(['s1']);
    } finally {
      await site.close();
    }
  });

  it("converts another session's page next, not after a burst of one session's pages that came first", async () => {
    const one = createHtmlConverter(1);
    try {
      const order: string[] = [];
      const convert = (session: string, label: string) =>
        one
          .toMarkdown(
            page(3).replace('<title>Big</title>', `<title>${label}</title>`),
            'https://a.test/',
            60_000,
            session,
          )
          .then((r) => {
            order.push(label);
            return r.title;
          });
      const pages = await Promise.all([
        ...Array.from({ length: 5 }, (_, n) => convert('A', `a${n}`)),
        convert('B', 'b0'),
      ]);
      expect(pages).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'b0']);
      expect(order).toEqual(['a0', 'b0', 'a1', 'a2', 'a3', 'a4']);
    } finally {
      await one.close();
    }
  });
});
