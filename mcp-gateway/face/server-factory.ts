import { Server } from '@modelcontextprotocol/server';
import { type FaceDeps, type FaceMode, faceLeg } from './face-leg.ts';
import { serveCatalog, servePassthrough, servePrompts } from './face-resources.ts';
import { serveTools } from './face-tools.ts';

// One factory for every leg of the MCP face. Each leg is a low-level Server whose tools/list and tools/call
// are answered from the gateway's rules (gateway.ts), so the MCP face and the REST routes share one set of
// checks: only active tools run, arguments are validated against the real schema, refusals are audited. What a
// leg is and the session it acts in: face-leg.ts; its tools: face-tools.ts; its resources and prompts:
// face-resources.ts.

const SERVER_INFO = { name: 'toolshift', version: '0.1.0' };

/** Cache hints of the modern leg: its tool list never changes, the catalog and prompts change on reload. */
const CACHE_HINTS = {
  'tools/list': { ttlMs: 3_600_000, cacheScope: 'public' as const },
  'prompts/list': { ttlMs: 60_000, cacheScope: 'public' as const },
  'resources/list': { ttlMs: 60_000, cacheScope: 'public' as const },
  'resources/templates/list': { ttlMs: 3_600_000, cacheScope: 'public' as const },
  'resources/read': { ttlMs: 0, cacheScope: 'private' as const },
};

/**
 * The face's Server. A stateless exchange (the modern leg; a view's 2025-era request the shared server does not
 * take) closes its server's transport when it is answered, and the SDK's teardown makes a "Connection closed"
 * error for whatever still waits on the connection — with a stack, the most of what a close costs — though after
 * an answered exchange nothing waits and the error is dropped unread. The face never sends a request of its own
 * to a client, so nothing that could wait reads that stack: none is captured during the teardown.
 */
class FaceServer extends Server {
  protected override _onclose(): void {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super._onclose();
    } finally {
      Error.stackTraceLimit = limit;
    }
  }
}

/** Builds the Server instance for one request (modern, view) or one session (legacy). */
export function buildFaceServer(deps: FaceDeps, mode: FaceMode): Server {
  const server = new FaceServer(SERVER_INFO, {
    capabilities: {
      tools: { listChanged: true },
      resources: { listChanged: true },
      prompts: { listChanged: true },
      logging: {},
    },
    cacheHints: CACHE_HINTS,
    instructions:
      mode.kind === 'view'
        ? `The tools of the toolshift toolsets ${mode.toolsets.join(', ')}.`
        : 'toolshift: call manage_toolsets (LIST, then ACTIVATE) to get the tools a task needs; run them with call_tool.',
  });
  const leg = faceLeg(deps, mode);
  serveTools(server, leg);
  if (servePassthrough(server, leg)) return server;
  serveCatalog(server, leg);
  servePrompts(server, deps.prompts);
  server.setRequestHandler('logging/setLevel', async () => ({}));
  return server;
}
