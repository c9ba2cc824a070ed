import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import { parseAllowList } from '../../../lib/net/allow-list.ts';
import { classifyAddress } from '../../../lib/net/ip-policy.ts';
import { checkUrl } from '../../../tool-server/guards/net/url-policy.ts';
import type { ToolContext } from '../../../tool-server/kit/define.ts';
import { ToolError } from '../../../tool-server/kit/errors.ts';
import { webContextFrom } from '../../../tool-server/tools/web/context.ts';
import { fetchUrl } from '../../../tool-server/tools/web/fetch.ts';
import { type LocalServer, localServer, tableResolver, webContext } from '../../helpers/web-servers.ts';

// Every test here that can observe its effect does: the loopback server records each request that reaches
// it, and a refused fetch must leave it untouched. Nothing leaves the machine: names resolve through a table,
// and the only sockets opened are to 127.0.0.1.

let target: LocalServer;
let open: LocalServer[] = [];
beforeEach(async () => {
  target = await localServer((_req, res) => res.end('the secret'));
  open = [target];
});
afterEach(async () => {
  await Promise.all(open.map((s) => s.close()));
});

async function refused(url: string, ctx: ToolContext, message: RegExp): Promise<void> {
  const err = await fetchUrl.run({ url }, ctx).then(
    (r) => r,
    (e: unknown) => e,
  );
  expect(err, `fetch_url ${url} must fail`).toBeInstanceOf(ToolError);
  expect((err as Error).message).toMatch(message);
}

const PUBLIC = '93.184.215.14';

describe('the loopback server is unreachable unless allow-listed', () => {
  it('refuses 127.0.0.1 by default and reaches it once allow-listed (host:port or host)', async () => {
    await refused(`${target.origin}/`, await webContext(), /127\.0\.0\.1: a loopback address/);
    expect(target.hits).toEqual([]);

    const byPort = await fetchUrl.run(
      { url: `${target.origin}/a` },
      await webContext({ allow: [`127.0.0.1:${target.port}`] }),
    );
    expect(byPort).toMatchObject({ status: 200, text: 'the secret' });
    const byHost = await fetchUrl.run(
      { url: `${target.origin}/b` },
      await webContext({ allow: ['127.0.0.1'] }),
    );
    expect(byHost).toMatchObject({ status: 200, text: 'the secret' });
    expect(target.hits).toEqual(['GET /a', 'GET /b']);
  });

  it('an allowed host:port does not open other ports, and allowing an address does not allow names for it', async () => {
    const other = await localServer();
    open.push(other);
    const { resolve } = tableResolver({ 'evil.test': '127.0.0.1' });
    const ctx = await webContext({ allow: [`127.0.0.1:${target.port}`], resolve });
    await refused(`${other.origin}/`, ctx, /loopback/);
    await refused(
      `http://evil.test:${target.port}/`,
      ctx,
      /evil\.test: it resolves to 127\.0\.0\.1, a loopback/,
    );
    expect(other.hits).toEqual([]);
    expect(target.hits).toEqual([]);
  });

  it('an allow-listed name is reached at the address the resolver gives', async () => {
    const { resolve, asked } = tableResolver({ 'intranet.test': '127.0.0.1' });
    const ctx = await webContext({ allow: ['intranet.test'], resolve });
    const r = await fetchUrl.run({ url: `http://intranet.test:${target.port}/wiki` }, ctx);
    expect(r).toMatchObject({
      status: 200,
      text: 'the secret',
      final_url: `http://intranet.test:${target.port}/wiki`,
    });
    expect(target.hits).toEqual(['GET /wiki']);
    expect(asked).toContain('intranet.test');
  });
});

describe('encoded IPv4 forms of 127.0.0.1, end to end', () => {
  // The WHATWG URL parser already rewrites every one of these to 127.0.0.1 (asserted first); the guard then
  // refuses the address. Each is fetched against the live loopback server, which must see nothing.
  const forms = [
    '2130706433',
    '0x7f.1',
    '0177.0.0.1',
    '127.1',
    '0x7f000001',
    '017700000001',
    '127.0.0.1.',
    '0x7F.0.0.1',
  ];

  it.each(forms)('http://%s refuses 127.0.0.1 and the server sees nothing', async (form) => {
    const url = `http://${form}:${target.port}/`;
    expect(new URL(url).hostname).toBe('127.0.0.1');
    await refused(url, await webContext(), /Refused to connect to 127\.0\.0\.1: a loopback address/);
    expect(target.hits).toEqual([]);
  });

  it.each([
    ['[::ffff:127.0.0.1]', /IPv6 form of an IPv4 address that is a loopback/],
    ['[::ffff:7f00:1]', /IPv6 form of an IPv4 address that is a loopback/],
    ['[0:0:0:0:0:ffff:7f00:1]', /IPv6 form of an IPv4 address that is a loopback/],
    ['[::127.0.0.1]', /outside global unicast/],
    ['[64:ff9b::127.0.0.1]', /IPv6 form of an IPv4 address that is a loopback/],
  ])(
    'http://%s (IPv6 spellings of 127.0.0.1) is refused and the server sees nothing',
    async (host, message) => {
      await refused(`http://${host}:${target.port}/`, await webContext(), message);
      expect(target.hits).toEqual([]);
    },
  );
});

describe('every refused address form', () => {
  const cases: Array<[string, RegExp]> = [
    ['127.0.0.1', /loopback/],
    ['127.255.255.254', /loopback/],
    ['0.0.0.0', /unspecified/],
    ['10.0.0.1', /private address/],
    ['172.16.5.4', /private address/],
    ['192.168.1.1', /private address/],
    ['169.254.169.254', /link-local .*metadata/],
    ['169.254.0.1', /link-local/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['255.255.255.255', /broadcast/],
    ['192.0.2.1', /reserved/],
    ['198.18.0.1', /reserved/],
    ['240.0.0.1', /reserved/],
    ['[::1]', /loopback/],
    ['[::]', /unspecified/],
    ['[fe80::1]', /link-local/],
    ['[fc00::1]', /unique local/],
    ['[fd12:3456::1]', /unique local/],
    ['[fec0::1]', /site-local/],
    ['[ff02::1]', /multicast/],
    ['[::ffff:10.0.0.1]', /IPv4 address that is a private/],
    ['[::ffff:169.254.169.254]', /IPv4 address that is a link-local/],
    ['[::ffff:100.64.0.1]', /IPv4 address that is a carrier-grade/],
    ['[64:ff9b::a9fe:a9fe]', /IPv4 address that is a link-local/],
    ['[2002:7f00:1::1]', /6to4/],
    ['[2001:0:4136:e378::1]', /Teredo/],
    ['[2001:db8::1]', /reserved/],
    ['[100::1]', /discard|outside global unicast/],
  ];

  it.each(cases)('the literal %s is refused without a DNS question', async (host, message) => {
    const { resolve, asked } = tableResolver({});
    await refused(`http://${host}/`, await webContext({ resolve }), message);
    expect(asked).toEqual([]);
  });

  it.each(cases)('a name resolving to %s is refused, naming the address', async (host, message) => {
    const address = host.replace(/^\[|\]$/g, '');
    const { resolve } = tableResolver({ 'inside.test': address });
    await refused('http://inside.test/', await webContext({ resolve }), message);
    await refused(
      'http://inside.test/',
      await webContext({ resolve }),
      new RegExp(`it resolves to ${address.replace(/[.[\]]/g, '\\$&')}`),
    );
  });

  it('public unicast addresses pass the classifier, in both families', () => {
    for (const a of [
      PUBLIC,
      '1.1.1.1',
      '8.8.8.8',
      '2606:4700:4700::1111',
      '2a00:1450:4001::200e',
      '::ffff:1.1.1.1',
      '64:ff9b::808:808',
    ]) {
      expect(classifyAddress(a), a).toMatchObject({ public: true });
    }
  });
});

describe('DNS that tries to slip past the check', () => {
  it('a name with a public and a private answer is refused, whichever comes first', async () => {
    for (const answers of [
      [PUBLIC, '127.0.0.1'],
      ['127.0.0.1', PUBLIC],
      [PUBLIC, '::1'],
    ]) {
      const { resolve } = tableResolver({ 'mixed.test': answers });
      await refused(
        `http://mixed.test:${target.port}/`,
        await webContext({ resolve }),
        /mixed\.test: it resolves to (127\.0\.0\.1|::1), a loopback/,
      );
    }
    expect(target.hits).toEqual([]);
  });

  it('a rebinding resolver (public first, loopback on the next question) is caught at connect time', async () => {
    const { resolve, asked } = tableResolver({
      'rebind.test': (call) => (call === 1 ? [PUBLIC] : ['127.0.0.1']),
    });
    await refused(
      `http://rebind.test:${target.port}/`,
      await webContext({ resolve }),
      /rebind\.test: it resolves to 127\.0\.0\.1, a loopback/,
    );
    // The first answer passed the early check; the connector asked again and refused what it would dial.
    expect(asked).toEqual(['rebind.test', 'rebind.test']);
    expect(target.hits).toEqual([]);
  });

  it('a name that does not resolve is a clear error', async () => {
    await refused(
      'http://nowhere.test/',
      await webContext(),
      /Could not resolve nowhere\.test: no such host/,
    );
  });
});

describe('redirects', () => {
  async function redirector(location: (port: number) => string) {
    const hop = await localServer((_req, res) => {
      res.writeHead(302, { location: location(target.port) });
      res.end();
    });
    open.push(hop);
    return hop;
  }

  it.each([
    ['a loopback port that is not allowed', (p: number) => `http://127.0.0.1:${p}/secret`, /loopback/],
    ['an IPv6 loopback', (p: number) => `http://[::1]:${p}/secret`, /loopback/],
    ['an encoded loopback', (p: number) => `http://2130706433:${p}/secret`, /loopback/],
    ['the metadata service', () => 'http://169.254.169.254/latest/meta-data/', /link-local .*metadata/],
    [
      'a name that resolves to loopback',
      (p: number) => `http://rebind.test:${p}/secret`,
      /rebind\.test: it resolves to 127\.0\.0\.1/,
    ],
    ['a file URL', () => 'file:///etc/passwd', /only http and https/],
    [
      'a URL with credentials',
      (p: number) => `http://admin:hunter2@127.0.0.1:${p}/`,
      /user name or password/,
    ],
  ])('a redirect to %s is refused and the target sees nothing', async (_what, location, message) => {
    const hop = await redirector(location);
    const { resolve } = tableResolver({ 'rebind.test': '127.0.0.1' });
    const ctx = await webContext({ allow: [`127.0.0.1:${hop.port}`], resolve });
    await refused(`${hop.origin}/start`, ctx, message);
    expect(hop.hits).toEqual(['GET /start']);
    expect(target.hits).toEqual([]);
  });

  it('a refusal never repeats the password of a redirect target', async () => {
    const hop = await redirector((p) => `http://admin:hunter2@127.0.0.1:${p}/`);
    const err = await fetchUrl
      .run({ url: `${hop.origin}/` }, await webContext({ allow: [`127.0.0.1:${hop.port}`] }))
      .catch((e: Error) => e);
    expect(String((err as Error).message)).not.toContain('hunter2');
  });

  it('follows 5 redirects, each hop re-checked, and stops at the 6th', async () => {
    const chain = await localServer((req, res) => {
      const n = Number(req.url?.split('/').pop());
      if (n === 99) return res.end('end of chain');
      res.writeHead(n % 2 === 0 ? 301 : 307, { location: `/hop/${n + 1}` });
      res.end();
    });
    open.push(chain);
    const ctx = await webContext({ allow: [`127.0.0.1:${chain.port}`] });
    await refused(`${chain.origin}/hop/0`, ctx, /Stopped after 5 redirects/);
    expect(chain.hits).toEqual([
      'GET /hop/0',
      'GET /hop/1',
      'GET /hop/2',
      'GET /hop/3',
      'GET /hop/4',
      'GET /hop/5',
    ]);

    const five = await localServer((req, res) => {
      const n = Number(req.url?.split('/').pop());
      if (n === 5) return res.end('arrived');
      res.writeHead(302, { location: `/hop/${n + 1}` });
      res.end();
    });
    open.push(five);
    const r = await fetchUrl.run(
      { url: `${five.origin}/hop/0` },
      await webContext({ allow: [`127.0.0.1:${five.port}`] }),
    );
    expect(r).toMatchObject({ text: 'arrived', final_url: `${five.origin}/hop/5` });
    expect((r as { redirects: string[] }).redirects).toHaveLength(5);
  });

  it('refuses an https to http step down, and credentials or other schemes in the first URL', async () => {
    expect(() => checkUrl('http://example.com/', new URL('https://example.com/login'))).toThrow(
      /from https to http would drop encryption/,
    );
    expect(checkUrl('https://example.com/b', new URL('http://example.com/a')).href).toBe(
      'https://example.com/b',
    );
    expect(checkUrl('/next', new URL('https://example.com/a/b')).href).toBe('https://example.com/next');
    const ctx = await webContext({ allow: [`127.0.0.1:${target.port}`] });
    await refused(`http://user:pw@127.0.0.1:${target.port}/`, ctx, /user name or password/);
    await refused(`http://user@127.0.0.1:${target.port}/`, ctx, /user name or password/);
    for (const url of [
      'file:///etc/passwd',
      'ftp://example.com/',
      'gopher://127.0.0.1:70/',
      'data:text/plain,hi',
      'javascript:alert(1)',
    ]) {
      await refused(url, ctx, /only http and https/);
    }
    await refused('not a url', ctx, /not a valid absolute URL/);
    expect(target.hits).toEqual([]);
  });
});

describe('proxies', () => {
  let saved: Record<string, string | undefined>;
  beforeEach(() => {
    saved = { HTTP_PROXY: process.env.HTTP_PROXY, http_proxy: process.env.http_proxy };
  });
  afterEach(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('HTTP_PROXY in the environment is ignored unless FETCH_USE_PROXY=1', async () => {
    const proxy = await localServer();
    open.push(proxy);
    process.env.HTTP_PROXY = proxy.origin;
    process.env.http_proxy = proxy.origin;
    const direct = await fetchUrl.run(
      { url: `${target.origin}/direct` },
      await webContext({ allow: [`127.0.0.1:${target.port}`] }),
    );
    expect(direct).toMatchObject({ text: 'the secret' });
    expect(proxy.hits).toEqual([]);
    expect(target.hits).toEqual(['GET /direct']);

    expect(loadConfig({ HTTP_PROXY: proxy.origin }).tools.web.proxy).toBeUndefined();
    const on = loadConfig({
      HTTP_PROXY: proxy.origin,
      FETCH_USE_PROXY: '1',
      FETCH_ALLOW_HOSTS: `127.0.0.1:${target.port}`,
    });
    expect(on.tools.web.proxy).toEqual({
      httpProxy: proxy.origin,
      httpsProxy: undefined,
      noProxy: undefined,
    });
    const viaProxy = {
      ...(await webContext()),
      web: { ...webContextFrom(on.tools.web), resolve: tableResolver({}).resolve },
    };
    await refused(`${target.origin}/proxied`, viaProxy, /Could not fetch/);
    expect(proxy.hits).toEqual([`CONNECT 127.0.0.1:${target.port}`]);
    expect(target.hits).toEqual(['GET /direct']);
  });

  it('through a proxy, a private target is still refused before anything is sent', async () => {
    const proxy = await localServer();
    open.push(proxy);
    const ctx = await webContext({ proxy: { httpProxy: proxy.origin } });
    await refused('http://10.1.2.3/', ctx, /private address/);
    const { resolve } = tableResolver({ 'inside.test': '192.168.0.10' });
    await refused(
      'http://inside.test/',
      await webContext({ resolve, proxy: { httpProxy: proxy.origin } }),
      /private address/,
    );
    expect(proxy.hits).toEqual([]);
  });
});

describe('FETCH_ALLOW_HOSTS', () => {
  it('is empty by default and refuses malformed entries at start', () => {
    expect(loadConfig({}).tools.web.allowHosts).toEqual([]);
    expect(
      loadConfig({ FETCH_ALLOW_HOSTS: '127.0.0.1:8080, [::1] ,intranet.test' }).tools.web.allowHosts,
    ).toEqual(['127.0.0.1:8080', '[::1]', 'intranet.test']);
    expect(() => webContextFrom(loadConfig({ FETCH_ALLOW_HOSTS: 'http://x.test/' }).tools.web)).toThrow(
      /FETCH_ALLOW_HOSTS: "http:\/\/x\.test\/" is not a host or host:port/,
    );
    const list = parseAllowList(['::1', '127.1:81', 'Intranet.TEST'], 'FETCH_ALLOW_HOSTS');
    expect(list.allows('::1', 5)).toBe(true);
    expect(list.allows('127.0.0.1', 81)).toBe(true);
    expect(list.allows('127.0.0.1', 82)).toBe(false);
    expect(list.allows('intranet.test', 443)).toBe(true);
  });
});
