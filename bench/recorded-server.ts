import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createMcpHandler, Server, type Tool } from '@modelcontextprotocol/server';

// The recorded-catalog MCP backend: an SDK v2 server on loopback that answers `tools/list` with tool
// definitions recorded from a real server (the GitHub MCP server's 117, in tests/fixtures/recorded/) and nothing else.
// It declares no tools/call handler, so a call is a protocol error: the definitions are real, the tools are not.
// Its server name and instructions say so, and the benchmark's toolset files say it in their descriptions.

/** The name the recorded server gives itself. */
export const RECORDED_SERVER_NAME = 'github-mcp-server (recorded definitions; tools/list only)';

/** Starts the server; `tools` are served as recorded, unchanged. */
export async function startRecordedServer(tools: readonly Tool[]) {
  const handler = createMcpHandler(() => {
    const server = new Server(
      { name: RECORDED_SERVER_NAME, version: 'recorded' },
      {
        capabilities: { tools: {} },
        instructions:
          'Recorded tool definitions of the GitHub MCP server, served for listing only: no tool here runs.',
      },
    );
    server.setRequestHandler('tools/list', async () => ({ tools: [...tools] }));
    return server;
  });
  return new Promise<{ url: string; close: () => Promise<void> }>((resolve) => {
    const server = serve(
      { hostname: '127.0.0.1', port: 0, fetch: (request: Request) => handler.fetch(request) },
      (info: AddressInfo) =>
        resolve({
          url: `http://127.0.0.1:${info.port}/mcp`,
          close: async () => {
            await handler.close();
            await new Promise<void>((done) => {
              server.close(() => done());
              if ('closeAllConnections' in server) server.closeAllConnections();
            });
          },
        }),
    );
  });
}
