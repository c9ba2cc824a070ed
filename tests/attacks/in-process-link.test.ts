import { afterEach, describe, expect, it } from 'vitest';
import { createGatewayClient } from '../../agent-server/clients/gateway.ts';
import { ServiceError } from '../../lib/http/http-client.ts';
import { localToolServerBackend } from '../../mcp-gateway/backends/tool-server-backend.ts';
import type { GatewayLocal } from '../../mcp-gateway/contract.ts';
import { localGateway } from '../../mcp-gateway/local.ts';
import type { ToolServerLocal } from '../../tool-server/contract.ts';
import { fetchOf, log, makeStack, type Stack, tokenSecurity } from '../helpers/stack.ts';

// The adversarial review of the in-process link (issue 40): what a request between the services gave and a call
// in the same process could lose. Each case shows the attack failing by its effect — the tool not run, the
// caller not left waiting, the ill-formed value refused — the same way it fails over HTTP.

const stacks: Stack[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
});

/** A gateway whose hot routes count their calls and never answer. */
function stalledGateway() {
  const made: string[] = [];
  const never = <T>(what: string) => {
    made.push(what);
    return new Promise<T>(() => undefined);
  };
  const local: GatewayLocal = {
    listToolsets: () => never('listToolsets'),
    manageToolsets: () => never('manageToolsets'),
    tools: () => never('tools'),
    callTool: () => never('callTool'),
    announceFence: () => never('announceFence'),
    fetch: () => never('fetch'),
  };
  return { local, made };
}

describe('the agent calling the gateway in the same process', () => {
  it('makes no call once the task is stopped, as no request would be sent', async () => {
    const { local, made } = stalledGateway();
    const client = createGatewayClient({ baseUrl: 'http://gateway' }, local).forTask('task_1');
    const stopped = new AbortController();
    stopped.abort(new Error('task stopped'));
    await expect(
      client.callTool('s1', 'write_file', { path: 'x', content: 'y' }, stopped.signal, {
        idempotency_key: 'k1',
      }),
    ).rejects.toThrow('task stopped');
    await expect(client.manageToolsets('s1', { action: 'LIST' }, stopped.signal)).rejects.toThrow(
      'task stopped',
    );
    await expect(client.announceFence('task_1', 2, stopped.signal)).rejects.toThrow('task stopped');
    expect(made).toEqual([]);
  });

  it('is not left waiting on a gateway that never answers: its signal, then the deadline an HTTP call has', async () => {
    const { local } = stalledGateway();
    const client = createGatewayClient({ baseUrl: 'http://gateway', timeoutMs: 50 }, local);
    const err = await client.tools('s1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ status: 504 });
    const stop = new AbortController();
    const waiting = client.listToolsets('s1', undefined, stop.signal);
    stop.abort(new Error('stopped while waiting'));
    await expect(waiting).rejects.toThrow('stopped while waiting');
  });
});

describe('the gateway calling the tool-server in the same process', () => {
  it('gives up on a tool that never ends with a 504, as the HTTP call did, so the keyed call settles', async () => {
    let ran = 0;
    const local: ToolServerLocal = {
      listTools: async () => [],
      callTool: () => {
        ran++;
        return new Promise(() => undefined);
      },
    };
    const backend = localToolServerBackend(local, 'tool-server', 50);
    const err = await backend.callTool('hang', {}, { session: 's1', key: 'k1' }).catch((e: unknown) => e);
    expect(ran).toBe(1);
    expect(err).toMatchObject({ status: 504 });
  });
});

describe("the gateway's hot routes in-process refuse what their HTTP routes refuse", () => {
  it('an oversized session id or idempotency key, and another credential’s MCP handle: 400, nothing run', async () => {
    const s = await makeStack();
    stacks.push(s);
    const local = localGateway({
      gateway: s.gateway,
      app: s.gatewayApp,
      face: s.face,
      security: tokenSecurity({}),
      log,
    });
    const overHttp = createGatewayClient({ baseUrl: 'http://gateway', fetch: fetchOf(s.gatewayApp) });
    const inProcess = createGatewayClient({ baseUrl: 'http://gateway' }, local);
    const cases: [string, (c: typeof inProcess) => Promise<unknown>][] = [
      ['a session id of 3,000 characters', (c) => c.tools('s'.repeat(3000))],
      [
        'an idempotency key of 5,000 characters',
        (c) =>
          c.callTool('s1', 'list_directory', { path: '.' }, undefined, { idempotency_key: 'k'.repeat(5000) }),
      ],
      ['a handle of the MCP face', (c) => c.tools('mcp_aaaaaaaaaaaaaaaaaaaaaaaa')],
      ['a tool name of 5,000 characters', (c) => c.callTool('s1', 'x'.repeat(5000), {})],
    ];
    for (const [what, attempt] of cases) {
      const viaHttp = (await attempt(overHttp).catch((e: unknown) => e)) as ServiceError;
      const local = (await attempt(inProcess).catch((e: unknown) => e)) as ServiceError;
      expect(viaHttp, what).toBeInstanceOf(ServiceError);
      expect(local, what).toBeInstanceOf(ServiceError);
      expect({ what, status: local.status, service: local.service }).toEqual({
        what,
        status: viaHttp.status,
        service: 'mcp-gateway',
      });
      expect(local.status, what).toBe(400);
    }
    // Nothing was called: the audit has no call of list_directory.
    const page = await s.gatewayStore.listAudit({ session_id: 's1', limit: 10 });
    expect(page.audit.map((r) => r.subject)).not.toContain('list_directory');
  });
});
