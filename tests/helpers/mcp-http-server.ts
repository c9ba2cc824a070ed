import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { CallToolResult, Tool } from '@modelcontextprotocol/server';
import { createMcpHandler, Server } from '@modelcontextprotocol/server';

// A Streamable HTTP MCP server built in the test with the SDK v2 server (createMcpHandler serves both the
// 2025 and the 2026-07-28 era from one endpoint) on 127.0.0.1. Its tool definitions are raw JSON Schema
// and can be changed while it runs (rug-pull tests); it can require a bearer token and records what it saw.

/** What a fixture tool does when called (it may take its time); the era is the protocol era of the request. */
export type FixtureRun = (
  args: Record<string, unknown>,
  seen: { era: 'legacy' | 'modern'; authorization: string | null; meta: Record<string, unknown> | null },
) => CallToolResult | Promise<CallToolResult>;

/** A tool the fixture serves: its definition as listed, and optionally what a call does. */
export interface FixtureTool {
  definition: Tool;
  run?: FixtureRun;
}

/** Starts the server; `tools` may be replaced or edited later (then call notifyToolsChanged()). */
export async function startMcpHttpServer(opts: {
  tools: FixtureTool[];
  token?: string;
  name?: string;
  instructions?: string;
  /** A fixed port (a server started again where it was); a free one by default. */
  port?: number;
}) {
  const state = {
    tools: opts.tools,
    /** Every HTTP request: whether its token was right. */
    requests: [] as { authorized: boolean }[],
    /** The era of every MCP message the server handled (one server instance each). */
    eras: [] as ('legacy' | 'modern')[],
  };
  const handler = createMcpHandler(({ era, requestInfo }) => {
    const authorization = requestInfo?.headers.get('authorization') ?? null;
    state.eras.push(era);
    const server = new Server(
      { name: opts.name ?? 'http-fixture', version: '1.0.0' },
      { capabilities: { tools: { listChanged: true } }, instructions: opts.instructions },
    );
    server.setRequestHandler('tools/list', async () => ({ tools: state.tools.map((t) => t.definition) }));
    server.setRequestHandler('tools/call', async (request) => {
      const tool = state.tools.find((t) => t.definition.name === request.params.name);
      if (!tool?.run) {
        return {
          isError: true,
          content: [
            { type: 'text', text: `${request.params.name}: recorded definition only, nothing runs it` },
          ],
        };
      }
      const meta = (request.params._meta as Record<string, unknown> | undefined) ?? null;
      return tool.run(request.params.arguments ?? {}, { era, authorization, meta });
    });
    return server;
  });
  const listening = await new Promise<{ url: string; close: () => Promise<void> }>((resolve, reject) => {
    const server = serve(
      {
        hostname: '127.0.0.1',
        port: opts.port ?? 0,
        fetch: async (request: Request) => {
          const authorized = !opts.token || request.headers.get('authorization') === `Bearer ${opts.token}`;
          state.requests.push({ authorized });
          if (!authorized) return Response.json({ error: 'bad token' }, { status: 401 });
          return handler.fetch(request);
        },
      },
      (info: AddressInfo) =>
        resolve({
          url: `http://127.0.0.1:${info.port}/mcp`,
          close: () =>
            new Promise<void>((done) => {
              server.close(() => done());
              if ('closeAllConnections' in server) server.closeAllConnections();
            }),
        }),
    );
    // A fixed port another process took: fail at once, naming it.
    server.once('error', (err) => reject(new Error(`the test MCP server cannot listen: ${err.message}`)));
  });
  return {
    url: listening.url,
    state,
    /** Tells open `subscriptions/listen` streams (2026-07-28 clients) that the tool list changed. */
    notifyToolsChanged: () => handler.notify.toolsChanged(),
    async close() {
      await handler.close();
      await listening.close();
    },
  };
}

/** A text result. */
export const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });
