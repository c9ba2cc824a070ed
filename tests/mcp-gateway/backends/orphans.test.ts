import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { childPids, isAlive, waitFor } from '../../helpers/processes.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// Upstream stdio servers never outlive the gateway: not when it closes, not after SIGTERM, and not after
// SIGKILL (their stdin closes, and the reference servers exit on it).

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const shipped = (name: string) => readFileSync(path.resolve('toolsets', name), 'utf8');
const EVERYTHING = `id: everything
description: The MCP reference test server.
backend:
  mcp:
    command: mcp-server-everything
    args: [stdio]
`;

describe('no orphans', () => {
  it('stops every server when the gateway closes', async () => {
    stack = await makeStack({
      toolsets: { 'memory.yaml': shipped('memory.yaml'), 'everything.yaml': EVERYTHING },
    });
    await stack.gateway.changeToolsets({
      action: 'ACTIVATE',
      toolset_ids: ['memory', 'everything'],
      session_id: 's',
    });
    const pids = Object.values(stack.gateway.upstreams()).map((u) => u.pid as number);
    expect(pids).toHaveLength(2);
    expect(pids.every(isAlive)).toBe(true);
    await stack.close();
    stack = undefined;
    expect(pids.filter(isAlive)).toEqual([]);
  });

  async function gatewayProcess() {
    const tmp = await mkdtemp(path.join(tmpdir(), 'gw-proc-'));
    const toolsets = path.join(tmp, 'toolsets');
    await mkdir(toolsets);
    await writeFile(
      path.join(toolsets, 'memory.yaml'),
      shipped('memory.yaml').replace('default: false', 'default: true'),
    );
    await writeFile(path.join(toolsets, 'everything.yaml'), `${EVERYTHING}default: true\n`);
    const child: ChildProcess = spawn(process.execPath, ['mcp-gateway/main.ts'], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        TOOLSETS_DIR: toolsets,
        TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
        GATEWAY_PORT: '0',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (d) => {
      stderr += d;
    });
    const servers = await waitFor(() => {
      if (child.exitCode !== null) throw new Error(`the gateway exited: ${stderr}`);
      const mcp = childPids(child.pid as number).filter((pid) =>
        readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('mcp-server-'),
      );
      return mcp.length === 2 ? mcp : undefined;
    }, 'the gateway to start its two default servers');
    return { child, servers, tmp };
  }

  it.each(['SIGKILL', 'SIGTERM'] as const)(
    'leaves no server running after the gateway gets %s',
    async (signal) => {
      const { child, servers, tmp } = await gatewayProcess();
      expect(servers.every(isAlive)).toBe(true);
      child.kill(signal);
      await waitFor(() => servers.every((pid) => !isAlive(pid)), `the servers to exit after ${signal}`);
      await waitFor(() => child.exitCode !== null || child.signalCode !== null, 'the gateway to exit');
      await rm(tmp, { recursive: true, force: true });
    },
  );
});
