import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { type Listening, listen } from '../../lib/http/serve.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../helpers/stack.ts';

// Issue 16: the client snippets, as people paste them — Claude Desktop through mcp-remote, VS Code's
// .vscode/mcp.json, Cursor's mcp.json, a fixed view in Claude Code's .mcp.json — each in its client's documented
// shape, pointing at the gateway's /mcp with the header that carries GATEWAY_MCP_TOKEN. They live in
// docs/mcp-face.md's "Connect an MCP client"; the README's section of the same name shows one of them, which must be
// one of those, word for word. Each is then resolved as its client would (mcp-remote's --header and ${VAR} from
// env, VS Code's ${input:…}, Cursor's ${env:…}) and sent to a running gateway.

const MCP_TOKEN = 'mcp-token-readme-1';

/** The JSON blocks of a page's "Connect an MCP client" section, each with the paragraph before it. */
function snippetsOf(page: string): { label: string; text: string }[] {
  const text = readFileSync(page, 'utf8');
  const start = text.indexOf('## Connect an MCP client');
  expect(start, `the section "Connect an MCP client" of ${page}`).toBeGreaterThan(-1);
  const end = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, end === -1 ? undefined : end);
  const found: { label: string; text: string }[] = [];
  for (const m of section.matchAll(/((?:[^\n]+\n)+)\n```json\n([\s\S]*?)\n```/g))
    found.push({ label: m[1], text: m[2] });
  return found;
}

const snippets = () => snippetsOf('docs/mcp-face.md');

/** The one snippet whose introducing paragraph names `client`. */
function snippet(client: string): Record<string, any> {
  const matching = snippets().filter((s) => s.label.includes(client));
  expect(
    matching.map((s) => s.label),
    `one snippet introduced with "${client}"`,
  ).toHaveLength(1);
  return JSON.parse(matching[0].text);
}

/** The only server entry of a client file's servers object. */
function only(servers: unknown): Record<string, any> {
  expect(servers).toBeTypeOf('object');
  const entries = Object.values(servers as Record<string, unknown>);
  expect(entries).toHaveLength(1);
  return entries[0] as Record<string, any>;
}

const GATEWAY_MCP = `http://127.0.0.1:${loadConfig({}).gateway.port}/mcp`;

let stack: Stack;
let server: Listening;
beforeAll(async () => {
  stack = await makeStack({
    toolsets: SPLIT_TOOLSETS,
    tokens: { admin: 'admin-token-readme-2', mcp: MCP_TOKEN },
  });
  server = await listen(stack.gatewayApp, 0, '127.0.0.1');
});
afterAll(async () => {
  await server.close();
  await stack.close();
});

/** Sends an initialize to the running gateway at the snippet's path, with the headers its client would send. */
async function initializeWith(url: string, headers: Record<string, string>, to = server): Promise<number> {
  expect(url === GATEWAY_MCP || url.startsWith(`${GATEWAY_MCP}/`), `${url} is the gateway's /mcp`).toBe(true);
  const res = await fetch(`${to.url}${new URL(url).pathname}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'readme', version: '1' },
      },
    }),
  });
  await res.body?.cancel();
  return res.status;
}

describe('the MCP client snippets (docs/mcp-face.md, and the README’s one)', () => {
  it('the README shows one of docs/mcp-face.md’s snippets, word for word, introduced the same way', () => {
    const readme = snippetsOf('README.md');
    expect(readme).toHaveLength(1);
    const docs = snippets();
    expect(docs.length).toBeGreaterThanOrEqual(4);
    const same = docs.find((d) => d.text === readme[0].text);
    expect(same, 'the README’s snippet is one of docs/mcp-face.md’s').toBeTruthy();
    const intro = (label: string) => label.trim().split('\n').at(-1);
    expect(intro(readme[0].label)).toBe(intro(same?.label ?? ''));
  });

  it('Claude Desktop through mcp-remote: mcpServers, a command with --header Authorization', async () => {
    const config = snippet('Claude Desktop');
    expect(Object.keys(config)).toEqual(['mcpServers']);
    const entry = only(config.mcpServers);
    expect(entry.command).toBe('npx');
    const args = entry.args as string[];
    expect(args.slice(0, 2)).toEqual(['-y', 'mcp-remote']);
    expect(args[2]).toBe(GATEWAY_MCP);
    // mcp-remote's --header is "Name:value", ${VAR} filled from its environment (the entry's env).
    const header = args[args.indexOf('--header') + 1];
    expect(args.indexOf('--header')).toBeGreaterThan(2);
    const colon = header.indexOf(':');
    const name = header.slice(0, colon);
    const template = header.slice(colon + 1);
    expect(name).toBe('Authorization');
    expect(header).not.toMatch(/\s/); // spaces in args are mangled by some clients
    const variable = /^\$\{(\w+)\}$/.exec(template)?.[1] as string;
    expect(variable, 'the header value comes from env').toBeTruthy();
    expect(entry.env[variable]).toMatch(/^Bearer <GATEWAY_MCP_TOKEN\b/);
    const value = String(entry.env[variable]).replace(/<[^>]*>/, MCP_TOKEN);
    expect(await initializeWith(args[2], { [name]: value })).toBe(200);
    expect(await initializeWith(args[2], {})).toBe(401);
  });

  it('VS Code: servers, type http, url and headers, the token from an input', async () => {
    const config = snippet('VS Code');
    expect(Object.keys(config).sort()).toEqual(['inputs', 'servers']);
    const entry = only(config.servers);
    expect(entry.type).toBe('http');
    expect(Object.keys(entry.headers)).toEqual(['Authorization']);
    const id = /^Bearer \$\{input:([\w-]+)\}$/.exec(entry.headers.Authorization)?.[1];
    expect(id, 'Authorization: Bearer, then an input reference').toBeTruthy();
    const input = (config.inputs as Record<string, unknown>[]).find((i) => i.id === id);
    expect(input).toMatchObject({ type: 'promptString', password: true });
    expect(input?.description).toMatch(/GATEWAY_MCP_TOKEN/);
    const value = entry.headers.Authorization.replace(`\${input:${id}}`, MCP_TOKEN);
    expect(await initializeWith(entry.url, { Authorization: value })).toBe(200);
  });

  it('Cursor: mcpServers with url and headers, the token from the environment', async () => {
    const config = snippet('Cursor');
    expect(Object.keys(config)).toEqual(['mcpServers']);
    const entry = only(config.mcpServers);
    expect(Object.keys(entry).sort()).toEqual(['headers', 'url']);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Cursor's own ${env:…} syntax, not a template
    expect(entry.headers).toEqual({ Authorization: 'Bearer ${env:GATEWAY_MCP_TOKEN}' });
    const env: Record<string, string> = { GATEWAY_MCP_TOKEN: MCP_TOKEN };
    const value = entry.headers.Authorization.replace(/\$\{env:(\w+)\}/g, (_: string, v: string) => env[v]);
    expect(await initializeWith(entry.url, { Authorization: value })).toBe(200);
  });

  it('a fixed view: its url names toolsets under /mcp/toolsets/, with the same Authorization header', async () => {
    const config = snippet('fixed view');
    const entry = only(config.mcpServers);
    expect(entry.type).toBe('http');
    expect(new URL(entry.url).pathname).toMatch(/^\/mcp\/toolsets\/[a-z0-9_,]+$/);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the client's own ${VAR} syntax, not a template
    expect(entry.headers).toEqual({ Authorization: 'Bearer ${GATEWAY_MCP_TOKEN}' });
    const value = entry.headers.Authorization.replace(/\$\{GATEWAY_MCP_TOKEN\}/, MCP_TOKEN);
    // The shipped toolsets, as `npm start` serves them (the view names two of them).
    const shipped = await makeStack({ tokens: { admin: 'admin-token-readme-3', mcp: MCP_TOKEN } });
    const gateway = await listen(shipped.gatewayApp, 0, '127.0.0.1');
    try {
      expect(await initializeWith(entry.url, { Authorization: value }, gateway)).toBe(200);
      expect(await initializeWith(entry.url, {}, gateway)).toBe(401);
    } finally {
      await gateway.close();
      await shipped.close();
    }
  });
});
