import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storedToken } from '../helpers/credentials.ts';
import { startDaemon } from '../helpers/daemon.ts';
import { completion } from '../helpers/msw.ts';
import { type ReceivedSpan, spanTree, startOtlpReceiver } from '../helpers/otlp.ts';

// Traces across the three services and an upstream MCP server, as `npm start` runs them (one process, its own),
// exported over OTLP/HTTP to a receiver this test starts on loopback. The model is scripted at the OpenAI HTTP
// edge: its first answer is a 500 (retried), then it activates a native and an upstream toolset, calls a tool of
// each, and writes a file the policy asks a human about; the test approves; the model answers. The upstream is
// an SDK server (tests/fixtures/mcp/traced-server.mjs) recording the `_meta` of each call it receives.
// PRINT_TRACE_TREE=1 prints the span trees (docs/operations.md shows them, under "Traces in a viewer").

const FIXTURE = path.resolve('tests/fixtures/mcp/traced-server.mjs');
const GOAL = 'Say hello through the echo server, list the workspace and write note.txt';
const API_KEY = 'sk-test-model-key-4f1c2a9e';
const UPSTREAM_SECRET = 'zq7-upstream-secret-b7d3e5a1c9';
/** A stranger's trace ids, on requests the services refuse. */
const REFUSED_TRACE = 'aaaabbbbccccddddeeeeffff00001111';
const OTLP_SECRET = 'otlp-header-secret-0c8e2f';
const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const CLIENT_TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;

function scriptedModel(): Server {
  let requests = 0;
  return createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      requests++;
      // The first request fails once: the client retries it (a retry event on the chat span).
      if (requests === 1) {
        // The provider's message echoes the key it was sent: the retry's reason must not carry it out.
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            error: { message: `overloaded (key ${API_KEY}), try again`, type: 'server_error' },
          }),
        );
        return;
      }
      const { messages } = JSON.parse(body) as { messages: { role: string }[] };
      const turn = messages.filter((m) => m.role === 'assistant').length;
      const call = (id: string, fn: string, args: unknown) => ({
        id,
        type: 'function',
        function: { name: fn, arguments: JSON.stringify(args) },
      });
      const reply = [
        {
          content: 'I need the file tools and the echo server.',
          tool_calls: [
            call('c1', 'manage_toolsets', {
              action: 'ACTIVATE',
              toolset_ids: ['file_system_tools', 'traced'],
            }),
          ],
        },
        {
          tool_calls: [
            call('c2', 'echo', { text: 'hello' }),
            call('c3', 'list_directory', { path: '.' }),
            call('c5', 'read_text_file', { path: 'notes.txt' }),
          ],
        },
        { tool_calls: [call('c4', 'write_file', { path: 'note.txt', content: 'traced' })] },
        { content: 'done: note.txt is written' },
      ][Math.min(turn, 3)];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(completion(reply, { prompt_tokens: 120, completion_tokens: 12 })));
    });
  });
}

/** Polls `check` until it holds (a bound, not a timing assertion). */
async function until(check: () => Promise<boolean>, what: string, limitMs = 30_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** Runs the scripted task on a daemon started with `env` (plus the test's own), approving its write. */
async function runTracedTask(extraEnv: Record<string, string>, opts: { restartWhileWaiting?: boolean } = {}) {
  const tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-tracing-'));
  const data = path.join(tmp, 'data');
  const ws = path.join(tmp, 'ws');
  const metaLog = path.join(tmp, 'meta.jsonl');
  await mkdir(path.join(data, 'toolsets'), { recursive: true });
  await mkdir(ws);
  await writeFile(metaLog, '');
  // A file that holds a secret where the event's copy of a result is cut (2,000 characters): neither the
  // secret nor its start may leave in a span.
  await writeFile(path.join(ws, 'notes.txt'), `${'x'.repeat(1985)} ${UPSTREAM_SECRET} and more`);
  await writeFile(
    path.join(data, 'toolsets', 'traced.yaml'),
    `id: traced
description: Echo texts back through a server that records its trace context.
variables: [TRACED_SECRET]
backend:
  mcp:
    command: ${process.execPath}
    args: [${FIXTURE}]
    env:
      META_LOG: ${metaLog}
      SECRET: \${TRACED_SECRET}
`,
  );
  const policy = path.join(tmp, 'policy.yaml');
  await writeFile(policy, 'default: allow\nrules:\n  - { tool: write_file, decision: ask }\n');
  const model = scriptedModel();
  const modelPort = await listen(model);
  const receiver = await startOtlpReceiver();
  const env = {
    TOOLSHIFT_DATA_DIR: data,
    FS_ROOTS: ws,
    HOME: tmp,
    OPENAI_BASE_URL: `http://127.0.0.1:${modelPort}/v1`,
    OPENAI_API_KEY: API_KEY,
    AGENT_MODEL: 'test-model',
    POLICY_FILE: policy,
    TRACED_SECRET: UPSTREAM_SECRET,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${OTLP_SECRET}`,
    ...extraEnv,
  };
  let stdout = '';
  const start = () => {
    const started = startDaemon(env);
    started.child.stdout.on('data', (c: Buffer) => {
      stdout += c;
    });
    return started;
  };
  let daemon = start();
  try {
    let urls = await daemon.listening;
    await daemon.ready;
    let agent = urls['agent-server'];
    const auth = { authorization: `Bearer ${storedToken(data, 'AGENT_API_TOKEN')}` };
    // Requests the services refuse make no span, whatever trace they claim to be part of.
    const claimed = { traceparent: `00-${REFUSED_TRACE}-00f067aa0ba902b7-01` };
    for (const url of [`${agent}/agent/tasks`, `${urls['mcp-gateway']}/mcp/admin/toolsets`]) {
      expect((await fetch(url, { headers: { ...claimed, authorization: 'Bearer wrong' } })).status).toBe(401);
    }
    expect((await fetch(`${urls['mcp-gateway']}/mcp`, { method: 'POST', headers: claimed })).status).toBe(
      401,
    );
    const json = { ...auth, 'content-type': 'application/json' };
    const submittedAt = Date.now();
    const submitted = (await (
      await fetch(`${agent}/agent/execute_task`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ goal: GOAL, wait: false }),
      })
    ).json()) as { task_id: string };
    const taskId = submitted.task_id;
    // The write waits for a human: approve it.
    await until(async () => {
      const { approvals } = (await (await fetch(`${agent}/agent/approvals`, { headers: auth })).json()) as {
        approvals: { task_id: string; call_id: string }[];
      };
      return approvals.some((a) => a.task_id === taskId && a.call_id === 'c4');
    }, 'the write waiting for approval');
    const seenWaiting = Date.now();
    if (opts.restartWhileWaiting) {
      // The daemon stops while the task waits; the next one picks the paused task up and goes on when approved.
      await daemon.stop();
      daemon = start();
      urls = await daemon.listening;
      await daemon.ready;
      agent = urls['agent-server'];
    }
    // The wait as the test saw it: at least from seeing the call wait to deciding, at most from submitting the
    // task to the decision's answer.
    const deciding = Date.now();
    const decided = await fetch(`${agent}/agent/tasks/${taskId}/approvals/c4`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ approve: true, reason: 'fine' }),
    });
    expect(decided.status).toBe(200);
    // (1 ms either side for the rounding of two clocks' readings.)
    const approvalWait = { atLeastMs: deciding - seenWaiting - 1, atMostMs: Date.now() - submittedAt + 1 };
    await until(async () => {
      const task = (await (await fetch(`${agent}/agent/tasks/${taskId}`, { headers: auth })).json()) as {
        status: string;
      };
      return task.status === 'completed';
    }, 'the task completed');
    expect(await readFile(path.join(ws, 'note.txt'), 'utf8')).toBe('traced');
    // An MCP client that traces: its call's trace context in params._meta is continued by the gateway's face.
    const client = new Client({ name: 'traced-client', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${urls['mcp-gateway']}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${storedToken(data, 'GATEWAY_MCP_TOKEN')}` } },
      }),
    );
    const listed = await client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'LIST' },
      _meta: { traceparent: CLIENT_TRACEPARENT },
    });
    expect(listed.isError).toBeFalsy();
    await client.close();
    // Stopping the daemon sends what its batches still hold.
    await daemon.stop();
    const credentials = JSON.parse(await readFile(path.join(data, 'credentials.json'), 'utf8')) as Record<
      string,
      string
    >;
    return {
      taskId,
      approvalWait,
      receiver,
      stdout,
      credentials,
      meta: (await readFile(metaLog, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, string> | null),
      cleanup: async () => {
        await receiver.close();
        model.closeAllConnections();
        await new Promise((r) => model.close(r));
        await rm(tmp, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await daemon.stop();
    await receiver.close();
    model.closeAllConnections();
    model.close();
    throw new Error(`${(err as Error).message}\n${daemon.stderr()}\n${stdout.slice(-3000)}`, { cause: err });
  }
}

/** The span trees as docs/operations.md shows them: the task's two traces (not the MCP client's call), with a few attributes. */
function docsTree(spans: ReceivedSpan[]): string {
  const task = new Set(spans.filter((s) => s.name.startsWith('invoke_agent')).map((s) => s.traceId));
  return spanTree(
    spans.filter((s) => task.has(s.traceId)),
    [
      'toolshift.task.status',
      'toolshift.tool.outcome',
      'toolshift.toolsets.changed',
      'toolshift.model.attempts',
    ],
  );
}

/** docs/operations.md's fenced block that starts with `trace `, trace ids left out. */
function docsBlock(): string {
  const text = readFileSync('docs/operations.md', 'utf8');
  const block = /```text\n(trace [^`]*?)```/.exec(text)?.[1];
  if (!block)
    throw new Error('docs/operations.md shows no span tree (a ```text block starting with "trace ")');
  return block.trim();
}
const withoutIds = (tree: string) => tree.replace(/\b[0-9a-f]{8}…/g, '…');

const one = (spans: ReceivedSpan[], pick: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan => {
  const found = spans.filter(pick);
  if (found.length !== 1) throw new Error(`expected one ${what}, found ${found.length}:\n${spanTree(spans)}`);
  return found[0];
};

describe('traces of a task across the three services and an upstream server', () => {
  let run: Awaited<ReturnType<typeof runTracedTask>>;
  let spans: ReceivedSpan[];

  beforeAll(async () => {
    run = await runTracedTask({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    spans = run.receiver.spans();
    if (process.env.PRINT_TRACE_TREE) console.log(docsTree(spans));
  }, 120_000);

  afterAll(async () => {
    await run?.cleanup();
  });

  it('exports OTLP/HTTP to the configured endpoint with its headers, each service under its own name', () => {
    expect(run.receiver.exports.length).toBeGreaterThan(0);
    for (const e of run.receiver.exports) {
      expect(e.path).toBe('/v1/traces');
      expect(e.headers.authorization).toBe(`Bearer ${OTLP_SECRET}`);
      expect(e.headers['content-type']).toContain('application/json');
    }
    expect(new Set(spans.map((s) => s.service))).toEqual(
      new Set(['toolshift-agent-server', 'toolshift-mcp-gateway', 'toolshift-tool-server']),
    );
  });

  it('an approval wait ends the attempt; the resumption is a new trace linked to it', () => {
    const attempts = spans.filter((s) => s.name === 'invoke_agent toolshift');
    expect(attempts).toHaveLength(2);
    const [first, second] = [...attempts].sort(
      (a, b) =>
        Number(a.attributes['toolshift.task.attempt']) - Number(b.attributes['toolshift.task.attempt']),
    );
    expect(first.parentSpanId).toBeUndefined();
    expect(first.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'toolshift',
      'gen_ai.request.model': 'test-model',
      'toolshift.task.id': run.taskId,
      'toolshift.task.status': 'awaiting_approval',
      'toolshift.approval.kind': 'call',
    });
    expect(second.traceId).not.toBe(first.traceId);
    expect(second.links).toEqual([{ traceId: first.traceId, spanId: first.spanId }]);
    expect(second.attributes).toMatchObject({
      'toolshift.task.status': 'completed',
      'toolshift.approval.approved': true,
    });
    const waitMs = Number(second.attributes['toolshift.approval.wait_ms']);
    expect(waitMs).toBeGreaterThanOrEqual(run.approvalWait.atLeastMs);
    expect(waitMs).toBeLessThanOrEqual(run.approvalWait.atMostMs);
  });

  it('a chat span per model call, with the model, provider, finish reasons, tokens and the retry', () => {
    const chats = spans.filter((s) => s.name === 'chat test-model');
    expect(chats).toHaveLength(4);
    const first = chats.find((c) => c.attributes['toolshift.step'] === 1) as ReceivedSpan;
    const attempt = spans.find((s) => s.spanId === first.parentSpanId) as ReceivedSpan;
    expect(attempt.name).toBe('invoke_agent toolshift');
    expect(first.kind).toBe(3); // CLIENT
    expect(first.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'test-model',
      'gen_ai.response.model': 'test-model',
      'gen_ai.response.id': 'chatcmpl-test',
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': 120,
      'gen_ai.usage.output_tokens': 12,
      'server.address': '127.0.0.1',
      'toolshift.model.attempts': 2,
    });
    expect(first.events.map((e) => e.name)).toEqual(['retry']);
    expect(first.events[0].attributes).toMatchObject({
      'http.response.status_code': 500,
      'toolshift.retry.attempt': 1,
    });
    // The tool-definition tokens each request carried, against all toolsets at once.
    expect(Number(first.attributes['toolshift.tool_definition_tokens'])).toBeLessThan(
      Number(first.attributes['toolshift.all_toolsets_tool_tokens']),
    );
  });

  it('manage_toolsets: the toolsets activated and the tool-definition tokens before and after', () => {
    const change = one(spans, (s) => s.name === 'execute_tool manage_toolsets', 'manage_toolsets span');
    expect(change.attributes).toMatchObject({
      'gen_ai.tool.name': 'manage_toolsets',
      'gen_ai.tool.call.id': 'c1',
      'toolshift.toolsets.action': 'ACTIVATE',
      'toolshift.toolsets.changed': ['file_system_tools', 'traced'],
    });
    expect(Number(change.attributes['toolshift.tool_definition_tokens.after'])).toBeGreaterThan(
      Number(change.attributes['toolshift.tool_definition_tokens.before']),
    );
  });

  it('a native call: agent-server → gateway → tool-server in one trace, parent to child', () => {
    const tool = one(spans, (s) => s.name === 'execute_tool list_directory', 'list_directory span');
    expect(tool.attributes).toMatchObject({
      'gen_ai.tool.call.id': 'c3',
      'toolshift.toolset': 'file_system_tools',
      'toolshift.tool.outcome': 'ok',
    });
    const gatewayServer = one(
      spans,
      (s) => s.service === 'toolshift-mcp-gateway' && s.parentSpanId === tool.spanId,
      'gateway request under list_directory',
    );
    expect(gatewayServer.kind).toBe(2); // SERVER
    expect(gatewayServer.traceId).toBe(tool.traceId);
    const gatewayCall = one(spans, (s) => s.parentSpanId === gatewayServer.spanId, 'gateway call span');
    expect(gatewayCall.name).toBe('tools/call list_directory');
    expect(gatewayCall.attributes).toMatchObject({
      'mcp.method.name': 'tools/call',
      'toolshift.backend': 'tool-server',
    });
    const toolServer = one(spans, (s) => s.parentSpanId === gatewayCall.spanId, 'tool-server request');
    expect(toolServer.service).toBe('toolshift-tool-server');
    expect(toolServer.attributes).toMatchObject({
      'gen_ai.tool.name': 'list_directory',
      'http.response.status_code': 200,
    });
  });

  it('an upstream call: the gateway passes the trace in params._meta, so the upstream server joins it', () => {
    const tool = one(spans, (s) => s.name === 'execute_tool echo', 'echo span');
    expect(tool.attributes).toMatchObject({ 'toolshift.toolset': 'traced', 'toolshift.tool.outcome': 'ok' });
    const gatewayServer = one(spans, (s) => s.parentSpanId === tool.spanId, 'gateway request under echo');
    const gatewayCall = one(
      spans,
      (s) => s.parentSpanId === gatewayServer.spanId,
      'gateway call to the upstream',
    );
    expect(gatewayCall.name).toBe('tools/call echo');
    expect(run.meta).toHaveLength(1);
    expect(run.meta[0]?.traceparent).toBe(`00-${tool.traceId}-${gatewayCall.spanId}-01`);
  });

  it('the paused call ends with the first attempt; it runs in the second, through the tool-server', () => {
    const writes = spans.filter((s) => s.name === 'execute_tool write_file');
    expect(writes).toHaveLength(2);
    const attempts = new Map(
      spans.filter((s) => s.name.startsWith('invoke_agent')).map((s) => [s.spanId, s]),
    );
    const waited = writes.find(
      (w) => w.attributes['toolshift.tool.outcome'] === 'awaiting_approval',
    ) as ReceivedSpan;
    const ran = writes.find((w) => w.attributes['toolshift.tool.outcome'] === 'ok') as ReceivedSpan;
    expect(attempts.get(waited.parentSpanId as string)?.attributes['toolshift.task.attempt']).toBe(1);
    expect(attempts.get(ran.parentSpanId as string)?.attributes['toolshift.task.attempt']).toBe(2);
    const hop = spans.filter((s) => s.traceId === ran.traceId && s.service === 'toolshift-tool-server');
    expect(hop.map((s) => s.attributes['gen_ai.tool.name'])).toEqual(['write_file']);
  });

  it('a request the services refuse makes no span', () => {
    expect(spans.filter((s) => s.traceId === REFUSED_TRACE)).toEqual([]);
  });

  it('no content by default: no prompt, argument or result on any span, and no secret in any exported byte', () => {
    // The provider's message was exported (the retry's reason), with the key it echoed taken out.
    const retry = spans.flatMap((s) => s.events).find((e) => e.name === 'retry');
    expect(retry?.attributes['toolshift.retry.reason']).toMatch(/overloaded \(key \[redacted\]\), try again/);
    const contentKeys = [
      'gen_ai.input.messages',
      'gen_ai.output.messages',
      'gen_ai.tool.call.arguments',
      'gen_ai.tool.call.result',
      'toolshift.task.goal',
    ];
    for (const s of spans)
      for (const k of contentKeys) expect(s.attributes[k], `${s.name} ${k}`).toBeUndefined();
    const bytes = run.receiver.bytes().toString('utf8');
    expect(bytes).not.toContain('Say hello');
    expect(bytes).not.toContain('echo: hello');
    for (const secret of [API_KEY, UPSTREAM_SECRET, OTLP_SECRET, ...Object.values(run.credentials)])
      expect(bytes).not.toContain(secret);
    expect(bytes).not.toContain(UPSTREAM_SECRET.slice(0, 6));
  });

  it('docs/operations.md shows this trace, span for span', () => {
    expect(withoutIds(docsBlock())).toBe(withoutIds(docsTree(spans)));
  });

  it("the gateway's MCP face continues the trace a client sends in params._meta", () => {
    const served = one(
      spans,
      (s) => s.traceId === CLIENT_TRACE && s.parentSpanId === CLIENT_SPAN,
      'span in the client trace',
    );
    expect(served.service).toBe('toolshift-mcp-gateway');
    expect(served.name).toBe('tools/call manage_toolsets');
    expect(served.kind).toBe(2); // SERVER
    expect(served.attributes).toMatchObject({
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'manage_toolsets',
    });
  });

  it('log lines carry the trace and span ids of the span they were written in', () => {
    const lines = run.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; name: string; trace_id?: string; span_id?: string });
    const waiting = lines.find((l) => l.msg === 'task awaits approval');
    const write = spans.find(
      (s) =>
        s.name === 'execute_tool write_file' &&
        s.attributes['toolshift.tool.outcome'] === 'awaiting_approval',
    ) as ReceivedSpan;
    expect(waiting).toMatchObject({ trace_id: write.traceId, span_id: write.spanId });
    // The tool-server's access line for the traced write is in that request's span.
    const served = spans.find(
      (s) => s.service === 'toolshift-tool-server' && s.attributes['gen_ai.tool.name'] === 'write_file',
    ) as ReceivedSpan;
    expect(
      lines.some(
        (l) => l.name === 'tool-server' && l.trace_id === served.traceId && l.span_id === served.spanId,
      ),
    ).toBe(true);
  });
});

describe('a task paused across a restart', () => {
  it('goes on in a new trace linked to the attempt the stopped process ended', async () => {
    const run = await runTracedTask(
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      { restartWhileWaiting: true },
    );
    try {
      const spans = run.receiver.spans();
      const attempts = spans.filter((s) => s.name === 'invoke_agent toolshift');
      expect(attempts).toHaveLength(2);
      const first = attempts.find(
        (a) => a.attributes['toolshift.task.status'] === 'awaiting_approval',
      ) as ReceivedSpan;
      const second = attempts.find(
        (a) => a.attributes['toolshift.task.status'] === 'completed',
      ) as ReceivedSpan;
      expect(second.links).toEqual([{ traceId: first.traceId, spanId: first.spanId }]);
      // Numbered across the two processes.
      expect([first, second].map((a) => a.attributes['toolshift.task.attempt'])).toEqual([1, 2]);
      // The call that waited runs in the new process's attempt, through the tool-server.
      const ran = one(
        spans,
        (s) => s.name === 'execute_tool write_file' && s.traceId === second.traceId,
        'write',
      );
      expect(ran.attributes['toolshift.tool.outcome']).toBe('ok');
      expect(spans.some((s) => s.traceId === second.traceId && s.service === 'toolshift-tool-server')).toBe(
        true,
      );
    } finally {
      await run.cleanup();
    }
  }, 120_000);
});

describe('content on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true), over OTLP/protobuf', () => {
  it('prompts, replies, arguments and results are exported; secrets still are not', async () => {
    const run = await runTracedTask({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' });
    try {
      for (const e of run.receiver.exports) expect(e.headers['content-type']).toBe('application/x-protobuf');
      // Protobuf carries strings as their UTF-8 bytes.
      const bytes = run.receiver.bytes().toString('utf8');
      expect(bytes).toContain(GOAL);
      expect(bytes).toContain('gen_ai.input.messages');
      expect(bytes).toContain('done: note.txt is written');
      // The upstream's answer as the gateway passed it on: its secret replaced by the variable's name.
      expect(bytes).toContain(`echo: hello (server key ${'$'}{TRACED_SECRET})`);
      expect(bytes).toContain('"path":"note.txt"');
      for (const secret of [API_KEY, UPSTREAM_SECRET, OTLP_SECRET, ...Object.values(run.credentials)])
        expect(bytes).not.toContain(secret);
      // Nor the start of one, where a copy of a result was cut inside it.
      expect(bytes).not.toContain(UPSTREAM_SECRET.slice(0, 6));
      expect(bytes).toContain('[redacted]');
    } finally {
      await run.cleanup();
    }
  }, 120_000);
});
