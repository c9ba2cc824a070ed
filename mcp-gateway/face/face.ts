import { createMcpHandler, isLegacyRequest, type McpHttpHandler } from '@modelcontextprotocol/server';
import type { Context, Hono } from 'hono';
import { HttpError } from '../../lib/http.ts';
import { JsonInputError, parseJson } from '../../lib/json.ts';
import { requireRole } from '../../lib/security.ts';
import type { Gateway } from '../core/gateway.ts';
import type { HandleStore } from './handles.ts';
import { LegacySessions } from './legacy-sessions.ts';
import type { LegacySessionStore } from './legacy-store.ts';
import { buildFaceServer, type FaceDeps, type PromptSource } from './server-factory.ts';

// toolshift as an MCP server, on the gateway's app (so every request has passed lib/security.ts: Host,
// Origin, Content-Type, token). `/mcp` serves both eras: 2026-07-28 requests go to a stateless handler whose
// tools/list is always [manage_toolsets, call_tool]; 2025-era requests to sessionful legacy serving (kept
// across restarts). On both, per-conversation toolsets live in a handle any later connection can name. Fixed
// views at `/mcp/toolsets/<id>[,<id>…]` serve exactly those toolsets' tools.

/** The largest MCP message accepted (the SDK's own default). */
export const MCP_MAX_BODY_BYTES = 4 * 1024 * 1024;

/** What the MCP face needs. */
export interface McpFaceOptions {
  gateway: Gateway;
  handles: HandleStore;
  /** Where legacy sessions are kept across a restart (legacy-store.ts, on the gateway's database). */
  legacyStore: LegacySessionStore;
  sessionIdleMs: number;
  /** The most legacy sessions open at once (MCP_MAX_SESSIONS). */
  maxSessions?: number;
  now?: () => number;
  prompts?: PromptSource;
  onError?: (err: Error) => void;
}

/** The MCP face of one gateway app. */
export type McpFace = ReturnType<typeof createMcpFace>;

/** The caller's credential digest, or null on a gateway without tokens. */
function credentialOf(c: Context): string | null {
  const principal = c.get('principal');
  return principal && principal.role !== 'local' ? principal.credential : null;
}

/** Reads a POST body once, bounded in size and nesting, and hands back a fresh request with it. */
async function readMessage(c: Context): Promise<{ request: Request; parsedBody?: unknown }> {
  const raw = c.req.raw;
  if (raw.method !== 'POST') return { request: raw };
  const text = await c.req.text();
  if (Buffer.byteLength(text) > MCP_MAX_BODY_BYTES) {
    throw new HttpError(413, `An MCP message may be at most ${MCP_MAX_BODY_BYTES} bytes`);
  }
  const request = new Request(raw.url, { method: 'POST', headers: raw.headers, body: text });
  try {
    return { request, parsedBody: parseJson(text) };
  } catch (err) {
    if (err instanceof JsonInputError && err.kind === 'depth')
      throw new HttpError(400, `MCP message ${err.detail}`);
    return { request }; // not JSON at all: the SDK answers with the protocol's parse error
  }
}

/** Builds the face: the modern handler, the legacy sessions, and the fixed views (made on first use). */
export function createMcpFace(opts: McpFaceOptions) {
  const deps: FaceDeps = {
    gateway: opts.gateway,
    handles: opts.handles,
    prompts: opts.prompts,
    handleChanged: (handle) => legacy.toolsChangedIn(handle),
  };
  const modern = createMcpHandler(
    (ctx) => {
      const id = ctx.authInfo?.clientId;
      return buildFaceServer(deps, { kind: 'modern', credential: id && id !== 'local' ? id : null });
    },
    { legacy: 'reject', onerror: opts.onError, maxRequestBodySize: MCP_MAX_BODY_BYTES },
  );
  const legacy = new LegacySessions({
    build: (conn, changed) => buildFaceServer(deps, { kind: 'legacy', conn, changed }),
    store: opts.legacyStore,
    idleMs: opts.sessionIdleMs,
    maxSessions: opts.maxSessions,
    now: opts.now,
    onEnd: (id) => opts.gateway.endSession(id),
  });
  const views = new Map<string, McpHttpHandler>();

  /** A view's handler; the view is a gateway session that has exactly its toolsets active. */
  async function view(idsParam: string): Promise<McpHttpHandler> {
    const ids = [
      ...new Set(
        idsParam
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      ),
    ].sort();
    const catalog = (await opts.gateway.listToolsets(`view:${ids.join('.')}`)).toolsets;
    const unknown = ids.filter((id) => !catalog.some((t) => t.id === id));
    if (ids.length === 0 || unknown.length > 0) {
      throw new HttpError(
        404,
        `Unknown toolset(s) in the view: ${unknown.join(', ') || '(none given)'}; valid: ${catalog.map((t) => t.id).join(', ')}`,
      );
    }
    // A disabled toolset, or one the policy denies activating, is served on no path: not its tools, prompts or
    // resources, and its server is not started. Checked on every request, as the operator may change either.
    const sessionId = `view:${ids.join('.')}`;
    opts.gateway.checkView(sessionId, ids);
    const inactive = catalog.filter((t) => ids.includes(t.id) && t.enabled && !t.active).map((t) => t.id);
    if (inactive.length > 0)
      await opts.gateway.changeToolsets({ action: 'ACTIVATE', toolset_ids: inactive, session_id: sessionId });
    let handler = views.get(sessionId);
    if (!handler) {
      handler = createMcpHandler(() => buildFaceServer(deps, { kind: 'view', toolsets: ids, sessionId }), {
        onerror: opts.onError,
        maxRequestBodySize: MCP_MAX_BODY_BYTES,
      });
      views.set(sessionId, handler);
    }
    return handler;
  }

  const authInfo = (credential: string | null) => ({
    token: '',
    clientId: credential ?? 'local',
    scopes: [],
  });

  return {
    /** Registers `/mcp` and the fixed views on the gateway's app. */
    mount(app: Hono): void {
      app.all('/mcp', async (c) => {
        requireRole(c, ['mcp', 'admin'], 'The MCP face');
        const credential = credentialOf(c);
        const { request, parsedBody } = await readMessage(c);
        if (await isLegacyRequest(request, parsedBody, { maxRequestBodySize: MCP_MAX_BODY_BYTES })) {
          return legacy.handle(request, credential, parsedBody);
        }
        return modern.fetch(request, { parsedBody, authInfo: authInfo(credential) });
      });
      app.all('/mcp/toolsets/:ids', async (c) => {
        requireRole(c, ['mcp', 'admin'], 'The MCP face');
        const handler = await view(c.req.param('ids'));
        const { request, parsedBody } = await readMessage(c);
        return handler.fetch(request, { parsedBody, authInfo: authInfo(credentialOf(c)) });
      });
    },
    /** Announces a deployment-level change (operator enable/disable, reload, approval) to MCP clients. */
    async announce(): Promise<void> {
      for (const h of [modern, ...views.values()]) {
        h.notify.toolsChanged();
        h.notify.resourcesChanged();
      }
      await legacy.broadcastToolsChanged();
    },
    /** A gateway session's toolsets changed on another replica: the legacy sessions acting in it here hear it. */
    toolsChangedIn: (sessionId: string) => legacy.toolsChangedIn(sessionId),
    /** Open legacy sessions, for tests and health. */
    legacySessions: () => legacy.size,
    async close(): Promise<void> {
      await legacy.close();
      await Promise.all([modern, ...views.values()].map((h) => h.close()));
    },
  };
}
