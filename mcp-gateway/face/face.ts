import {
  createMcpHandler,
  isLegacyRequest,
  type McpHttpHandler,
  type Server,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import type { Context, Hono } from 'hono';
import { HttpError } from '../../lib/http/http.ts';
import { JsonInputError, parseJson } from '../../lib/http/json.ts';
import { bodyText } from '../../lib/http/node-request.ts';
import { chargeCaller, requireRole } from '../../lib/http/security.ts';
import { FACE_SESSION_PREFIXES, isFaceSessionId, OWN_SESSION_RULE } from '../contract.ts';
import type { Gateway } from '../core/gateway.ts';
import { Refusal } from '../refusals.ts';
import type { FaceDeps, PromptSource } from './face-leg.ts';
import { HandleError, type HandleStore } from './handles.ts';
import { LegacySessions } from './legacy-sessions.ts';
import type { LegacySessionStore } from './legacy-store.ts';
import { buildFaceServer } from './server-factory.ts';
import { type SharedServer, sharedServer } from './shared-server.ts';

// toolshift as an MCP server, on the gateway's app (so every request has passed lib/http/security.ts: Host,
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

/** A request's message: the request as it came, and its body read once (parsed when it is JSON). */
interface Message {
  raw: Request;
  parsedBody?: unknown;
  /** The body's text when it is not JSON (the SDK answers it with the protocol's parse error). */
  text?: string;
}

/**
 * Reads a POST body once (from the socket when served by Node), bounded in size and nesting. The request the
 * SDK serves is made from it only on a path that hands the request to the SDK (sdkRequest).
 */
async function readMessage(c: Context): Promise<Message> {
  const raw = c.req.raw;
  if (raw.method !== 'POST') return { raw };
  // Without a byte-order mark, as the SDK reads a body (the UTF-8 decode of the Fetch standard drops one): what is
  // counted and checked here is exactly what the SDK would run, never text only it can parse.
  const text = (await bodyText(c, MCP_MAX_BODY_BYTES)).replace(/^\uFEFF/, '');
  try {
    return { raw, parsedBody: parseJson(text) };
  } catch (err) {
    if (err instanceof JsonInputError && err.kind === 'depth')
      throw new HttpError(400, `MCP message ${err.detail}`);
    return { raw, text };
  }
}

/**
 * The request for the SDK: without a body when it is parsed (the SDK reads `parsedBody` then), with the text when
 * it is not JSON.
 */
function sdkRequest({ raw, parsedBody, text }: Message): Request {
  if (raw.method !== 'POST') return raw;
  const init = { method: 'POST', headers: raw.headers };
  return new Request(raw.url, parsedBody !== undefined ? init : { ...init, body: text ?? '' });
}

/**
 * Whether a message is of the 2025 era. A parsed body is classified from the request's method and headers as they
 * came (the SDK reads no body then); an unparsed one from the SDK's request.
 */
function isLegacy(m: Message): Promise<boolean> {
  const request = m.parsedBody !== undefined ? m.raw : sdkRequest(m);
  return isLegacyRequest(request, m.parsedBody, { maxRequestBodySize: MCP_MAX_BODY_BYTES });
}

type AuthInfo = { token: string; clientId: string; scopes: string[] };

/** The SDK's view of the caller: its credential digest as the client id (`local` on a gateway without tokens). */
const authInfo = (credential: string | null): AuthInfo => ({
  token: '',
  clientId: credential ?? 'local',
  scopes: [],
});

/**
 * A 2025-era request to a fixed view that the shared server does not take (initialize, a notification, a batch,
 * a malformed message), served statelessly by a server of its own, answered with one JSON body.
 * The SDK's stateless fallback answers over an SSE stream even when nothing precedes the result (the face never
 * sends progress or logs mid-call), and the stream's setup and teardown on both ends cost about as much CPU as
 * the rest of the hop.
 */
async function legacyStateless(
  build: () => Server,
  request: Request,
  extra: { parsedBody?: unknown; authInfo: AuthInfo },
): Promise<Response> {
  if (request.method !== 'POST') {
    return Response.json(
      { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null },
      { status: 405 },
    );
  }
  const server = build();
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
    maxRequestBodySize: MCP_MAX_BODY_BYTES,
  });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request, extra);
  } finally {
    void transport.close().catch(() => {});
    void server.close().catch(() => {});
  }
}

/**
 * A fixed view's handlers: the modern era's; for the 2025 era, one shared server answering single requests, and a
 * server per request for the rest (shared-server.ts).
 */
type View = { modern: McpHttpHandler; build: () => Server; shared: SharedServer };

/** What the face's routes share: its options, the servers' dependencies, both eras' serving and the views. */
interface FaceState {
  readonly opts: McpFaceOptions;
  readonly deps: FaceDeps;
  readonly modern: McpHttpHandler;
  readonly legacy: LegacySessions;
  readonly views: Map<string, View>;
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
  const st: FaceState = { opts, deps, modern, legacy, views: new Map() };
  const modernHandlers = () => [modern, ...[...st.views.values()].map((v) => v.modern)];
  const sharedServers = () => [...st.views.values()].map((v) => v.shared);

  return {
    /** Registers `/mcp` and the fixed views on the gateway's app. */
    mount: (app: Hono): void => mount(st, app),
    /**
     * The session a request of another door (the gateway's REST routes) names, checked: one of the face's is
     * refused unless it is a handle of the request's own credential (a view is the face's alone). Unknown and
     * foreign handles are refused in the same words, so nothing about another credential's handle is confirmed.
     */
    claimSession: (c: Context, sessionId: string): Promise<void> =>
      claimSession(opts.handles, credentialOf(c), sessionId),
    /** The same claim for a caller in the same process (mcp-gateway/local.ts): `credential` is its principal's. */
    claimSessionAs: (credential: string | null, sessionId: string): Promise<void> =>
      claimSession(opts.handles, credential, sessionId),
    /** Announces a deployment-level change (operator enable/disable, reload, approval) to MCP clients. */
    async announce(): Promise<void> {
      for (const h of modernHandlers()) {
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
      await Promise.all(modernHandlers().map((h) => h.close()));
      await Promise.all(sharedServers().map((s) => s.close()));
    },
  };
}

function mount(st: FaceState, app: Hono): void {
  app.all('/mcp', async (c) => {
    requireRole(c, ['mcp', 'admin'], 'The MCP face');
    const credential = credentialOf(c);
    const message = await readMessage(c);
    const { parsedBody } = message;
    await chargeToolCalls(c, parsedBody);
    if (await isLegacy(message)) return st.legacy.handle(sdkRequest(message), credential, parsedBody);
    return st.modern.fetch(sdkRequest(message), { parsedBody, authInfo: authInfo(credential) });
  });
  app.all('/mcp/toolsets/:ids', async (c) => {
    requireRole(c, ['mcp', 'admin'], 'The MCP face');
    const handler = await view(st, c.req.param('ids'));
    const message = await readMessage(c);
    const { raw, parsedBody } = message;
    await chargeToolCalls(c, parsedBody);
    const extra = { parsedBody, authInfo: authInfo(credentialOf(c)) };
    if (!(await isLegacy(message))) return handler.modern.fetch(sdkRequest(message), extra);
    const single = handler.shared.accepts(raw, parsedBody);
    if (single) return handler.shared.answer(single, { request: raw, authInfo: extra.authInfo });
    return legacyStateless(handler.build, sdkRequest(message), extra);
  });
}

/** A user's tool calls (each `tools/call` of a message or batch) count against their tool calls a minute (429 past it). */
async function chargeToolCalls(c: Context, parsedBody: unknown): Promise<void> {
  const messages = Array.isArray(parsedBody) ? parsedBody : [parsedBody];
  const calls = messages.filter((m) => (m as { method?: unknown } | null)?.method === 'tools/call').length;
  if (calls > 0) await chargeCaller(c, 'tool_calls_per_minute', calls);
}

/** A view's handler; the view is a gateway session that has exactly its toolsets active. */
async function view(st: FaceState, idsParam: string): Promise<View> {
  const ids = [
    ...new Set(
      idsParam
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ].sort();
  // Unknown, disabled or denied toolsets are refused on every request, as the operator may change them: a
  // view serves nothing of them (not their tools, prompts or resources) and their server is not started.
  const sessionId = `${FACE_SESSION_PREFIXES.view}${ids.join('.')}`;
  const inactive = await st.opts.gateway.checkView(sessionId, ids);
  if (inactive.length > 0)
    await st.opts.gateway.changeToolsets({
      action: 'ACTIVATE',
      toolset_ids: inactive,
      session_id: sessionId,
    });
  let handler = st.views.get(sessionId);
  if (!handler) {
    const build = () => buildFaceServer(st.deps, { kind: 'view', toolsets: ids, sessionId });
    const modern = createMcpHandler(build, {
      legacy: 'reject',
      onerror: st.opts.onError,
      maxRequestBodySize: MCP_MAX_BODY_BYTES,
    });
    handler = { modern, build, shared: sharedServer(build()) };
    st.views.set(sessionId, handler);
  }
  return handler;
}

async function claimSession(
  handles: HandleStore,
  credential: string | null,
  sessionId: string,
): Promise<void> {
  if (!isFaceSessionId(sessionId)) return;
  if (!sessionId.startsWith(FACE_SESSION_PREFIXES.view)) {
    try {
      await handles.use(sessionId, credential);
      return;
    } catch (err) {
      if (!(err instanceof HandleError)) throw err;
    }
  }
  throw new Refusal(
    'invalid_arguments',
    `session_id ${JSON.stringify(sessionId)} is not a session this credential may act in here: ` +
      `the MCP face's handles are used only by the credential that made them, and its fixed views only at ` +
      `/mcp/toolsets/<ids>. Name ${OWN_SESSION_RULE}, or leave session_id out for the default session.`,
  );
}
