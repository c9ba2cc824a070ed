import { randomBytes } from 'node:crypto';
import {
  type CallToolResult,
  type Prompt,
  ProtocolError,
  ResourceNotFoundError,
  Server,
  type Tool,
} from '@modelcontextprotocol/server';
import { HttpError } from '../../lib/http/http.ts';
import { describeIssues } from '../../lib/http/issues.ts';
import { LIMITS } from '../../lib/http/limits.ts';
import { extractContext, GENAI, inSpan, MCP, type Span, SpanKind } from '../../lib/telemetry/tracing.ts';
import { CALL_TOOL, FACE_SESSION_PREFIXES, MANAGE_TOOLSETS, RenderPromptRequest } from '../contract.ts';
import type { Gateway } from '../core/gateway.ts';
import { validManageArgs } from '../core/manage-toolsets.ts';
import { Refusal } from '../refusals.ts';
import { HandleError, type HandleStore } from './handles.ts';
import type { LegacyConnection } from './legacy-sessions.ts';
import {
  callArgs,
  callTool,
  checkLength,
  legacyManageTool,
  modernManageTool,
  TOOL_NAME_MAX,
} from './meta-tools.ts';
import { errorResult, jsonResult, toCallToolResult, toMcpTool } from './results.ts';

// One factory for every leg of the MCP face. Each leg is a low-level Server whose tools/list and tools/call
// are answered from the gateway's rules (gateway.ts), so the MCP face and the REST routes share one set of
// checks: only active tools run, arguments are validated against the real schema, refusals are audited.

/** The catalog as an MCP resource, for clients that want context without a tool call. */
export const CATALOG_URI = 'toolshift://toolsets';

/** Playbook prompts as the face serves them (prompts.ts implements it). */
export interface PromptSource {
  list(): Prompt[];
  render(name: string, args: Record<string, string>): { description?: string; text: string };
}

/** Which leg a server instance serves. */
export type FaceMode =
  /** 2026-07-28: no protocol session; state is a handle bound to `credential`. */
  | { kind: 'modern'; credential: string | null }
  /** 2025-era: one connection per MCP session, acting in its handle's gateway session once it has one; `changed` sends it list_changed. */
  | { kind: 'legacy'; conn: LegacyConnection; changed: () => void }
  /** A fixed view: exactly these toolsets' tools, no meta-tool. */
  | { kind: 'view'; toolsets: string[]; sessionId: string };

type LegacyMode = Extract<FaceMode, { kind: 'legacy' }>;

/** What the factory needs. */
export interface FaceDeps {
  gateway: Gateway;
  handles: HandleStore;
  prompts?: PromptSource;
  /** Tells the legacy connections acting in a handle that its toolsets changed, whichever connection changed them. */
  handleChanged: (handle: string) => Promise<void> | void;
}

const SERVER_INFO = { name: 'toolshift', version: '0.1.0' };

/** JSON-RPC's Invalid Params code. */
const INVALID_PARAMS = -32602;

/** Cache hints of the modern leg: its tool list never changes, the catalog and prompts change on reload. */
const CACHE_HINTS = {
  'tools/list': { ttlMs: 3_600_000, cacheScope: 'public' as const },
  'prompts/list': { ttlMs: 60_000, cacheScope: 'public' as const },
  'resources/list': { ttlMs: 60_000, cacheScope: 'public' as const },
  'resources/templates/list': { ttlMs: 3_600_000, cacheScope: 'public' as const },
  'resources/read': { ttlMs: 0, cacheScope: 'private' as const },
};

/** Runs `fn`, turning the gateway's refusals and handle errors into tool errors the model reads. */
async function refusalsAsErrors(fn: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof Refusal || err instanceof HttpError || err instanceof HandleError)
      return errorResult(err.message);
    throw err;
  }
}

/** Builds the Server instance for one request (modern, view) or one session (legacy). */
export function buildFaceServer(deps: FaceDeps, mode: FaceMode): Server {
  const { gateway } = deps;
  const server = new Server(SERVER_INFO, {
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

  /**
   * The gateway session of a legacy or view server. A legacy connection acts in its handle's session once it
   * has one (the handle checked and its lifetime refreshed); a handle that expired is let go, the connection
   * is back on its own session, and a `strict` caller (a tool call) hears why instead.
   */
  const session = async (strict = false): Promise<string> => {
    if (mode.kind === 'view') return mode.sessionId;
    if (mode.kind !== 'legacy') return '';
    const { conn } = mode;
    const handle = conn.handle;
    if (handle === undefined) return conn.ownSession;
    try {
      return await deps.handles.use(handle, conn.credential);
    } catch (err) {
      if (!(err instanceof HandleError)) throw err;
      await conn.bind(undefined);
      mode.changed();
      if (strict) throw err;
      return conn.ownSession;
    }
  };

  /**
   * A legacy connection takes the handle a client named (from any earlier connection of its credential): it
   * acts in that handle's session from now on. An unknown, expired or foreign handle is refused.
   */
  const adopt = async (legacy: LegacyMode, given: unknown): Promise<string> => {
    if (typeof given !== 'string') throw new HandleError('`session` must be a string handle');
    checkLength('session', given, LIMITS.sessionId);
    const handle = await deps.handles.use(given, legacy.conn.credential);
    if (legacy.conn.handle !== handle) {
      await legacy.conn.bind(handle);
      legacy.changed();
    }
    return handle;
  };
  /** Whether a legacy call names a handle (an empty string, as some clients fill optional fields, does not). */
  const named = (given: unknown) => given !== undefined && given !== '';

  /**
   * The session's usable tools. A view shows only its own toolsets' tools, whatever else its gateway session
   * has active (that session is reachable by name over REST).
   */
  const usable = async () => {
    const sessionId = await session();
    await gateway.listed(sessionId);
    const all = await gateway.tools(sessionId);
    return mode.kind === 'view' ? all.filter((t) => mode.toolsets.includes(t.toolset)) : all;
  };

  const tools = async (): Promise<Tool[]> => {
    if (mode.kind === 'modern') return [modernManageTool(deps.handles.idleText), callTool(true)];
    const active = (await usable()).map(toMcpTool);
    if (mode.kind === 'view') return active;
    return [legacyManageTool(deps.handles.idleText), callTool(false), ...active];
  };

  /** The modern meta-tool: mints or checks the handle, runs the action, returns the usable tools in full. */
  const manageModern = async (args: Record<string, unknown>, credential: string | null) => {
    const { session, ...rest } = args;
    if (session !== undefined && typeof session !== 'string')
      throw new HandleError('`session` must be a string handle');
    if (session) checkLength('session', session, LIMITS.sessionId);
    const action = String(rest.action ?? '').toUpperCase();
    let handle: string | undefined;
    if (session) handle = await deps.handles.use(session, credential);
    else if (action === 'ACTIVATE') {
      // Arguments that will be refused mint nothing: the refusal below runs on a throwaway session id.
      if (validManageArgs(rest)) handle = await deps.handles.mint(credential);
    } else if (action !== 'LIST') {
      throw new HandleError(
        `${action || 'This action'} needs \`session\`: the handle an earlier ACTIVATE returned`,
      );
    }
    // LIST without a session reads a fresh, never-stored session: the catalog with the default toolsets.
    const sessionId = handle ?? `${FACE_SESSION_PREFIXES.handle}list_${randomBytes(8).toString('hex')}`;
    const res = await gateway.manageToolsets(sessionId, rest);
    if (!handle) return jsonResult(res.result);
    if (res.change) await deps.handleChanged(handle);
    await gateway.listed(handle);
    const usable = (await gateway.tools(handle)).map(toMcpTool);
    return jsonResult({ session: handle, ...res.result, tools: usable });
  };

  /**
   * The legacy meta-tool: acts in the named handle's session, or the connection's. The connection's first
   * change of toolsets takes a handle (a new one starts from the defaults, as the connection's own session
   * still is), so its toolsets outlive the connection; the result carries it.
   */
  const manageLegacy = async (legacy: LegacyMode, args: Record<string, unknown>) => {
    const { conn } = legacy;
    const { session: given, ...rest } = args;
    let sessionId = named(given) ? await adopt(legacy, given) : await session();
    const action = String(rest.action ?? '')
      .trim()
      .toUpperCase();
    // Arguments that will be refused take no handle.
    if (
      conn.handle === undefined &&
      (action === 'ACTIVATE' || action === 'DEACTIVATE') &&
      validManageArgs(rest)
    ) {
      sessionId = await deps.handles.mint(conn.credential);
      await conn.bind(sessionId);
    }
    const res = await gateway.manageToolsets(sessionId, rest);
    // Every connection acting in the handle hears of it, this one included (a change always has a handle).
    if (res.change) await deps.handleChanged(sessionId);
    return jsonResult(conn.handle === undefined ? res.result : { session: conn.handle, ...res.result });
  };

  server.setRequestHandler('tools/list', async () => ({ tools: await tools() }));
  server.setRequestHandler('tools/call', async (request) => {
    const name = request.params.name;
    if (name.length > TOOL_NAME_MAX) {
      return errorResult(`The tool name must be at most ${TOOL_NAME_MAX} characters (got ${name.length})`);
    }
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    // A client's trace context in `params._meta` (the MCP conventions) is continued; else the HTTP request's.
    const parent = extractContext(request.params._meta as Record<string, unknown> | undefined);
    return inSpan(
      'mcp-gateway',
      `tools/call ${name}`,
      {
        kind: SpanKind.SERVER,
        parent,
        attributes: { [MCP.method]: 'tools/call', [GENAI.toolName]: name, 'toolshift.face': mode.kind },
        // No parent in `_meta`: the HTTP request's, when it carried one; else a trace of its own.
      },
      (span) => callFromClient(name, args, span),
    );
  });
  const callFromClient = (name: string, args: Record<string, unknown>, span: Span | undefined) =>
    refusalsAsErrors(async () => {
      if (mode.kind === 'modern') {
        if (name === MANAGE_TOOLSETS) return manageModern(args, mode.credential);
        if (name !== CALL_TOOL) {
          throw new HandleError(`Unknown tool ${name}: this endpoint serves manage_toolsets and call_tool`);
        }
        if (typeof args.session !== 'string')
          throw new HandleError('call_tool needs `session`: the handle from manage_toolsets');
        checkLength('session', args.session, LIMITS.sessionId);
        const sessionId = await deps.handles.use(args.session, mode.credential);
        const call = callArgs(args);
        return toCallToolResult(await gateway.callTool(sessionId, call.name, call.arguments));
      }
      if (mode.kind === 'legacy' && name === MANAGE_TOOLSETS) return manageLegacy(mode, args);
      if (mode.kind === 'legacy' && name === CALL_TOOL) {
        const call = callArgs(args);
        const sessionId = named(args.session) ? await adopt(mode, args.session) : await session(true);
        return toCallToolResult(await gateway.callTool(sessionId, call.name, call.arguments));
      }
      if (mode.kind === 'view' && !(await usable()).some((t) => t.name === name)) {
        throw new HandleError(`Unknown tool ${name} in this view of ${mode.toolsets.join(', ')}`);
      }
      return toCallToolResult(await gateway.callTool(await session(true), name, args));
    }).then((result) => {
      if (span && (result as { isError?: boolean }).isError) span.setAttribute(GENAI.errorType, 'tool_error');
      return result;
    });

  // A view of one upstream server's toolset passes that server's own prompts and resources through, each
  // read checked (enabled, active in the view) and audited by the gateway first: a disabled toolset's server
  // is never started by a view, and a held session stops getting them the moment it is disabled.
  const viewed = mode.kind === 'view' && mode.toolsets.length === 1 ? mode.toolsets[0] : undefined;
  const upstream = viewed !== undefined && gateway.upstream(viewed) ? viewed : undefined;
  const checked = async (method: string) => gateway.viewUpstream(await session(), viewed as string, method);
  const fromUpstream = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ProtocolError) throw err;
      throw new ProtocolError(-32603, (err as Error).message);
    }
  };
  if (upstream) {
    server.setRequestHandler('prompts/list', (r) =>
      fromUpstream(async () => (await checked('prompts/list')).passthrough('listPrompts', r.params)),
    );
    server.setRequestHandler('prompts/get', (r) =>
      fromUpstream(async () => (await checked('prompts/get')).passthrough('getPrompt', r.params)),
    );
    server.setRequestHandler('resources/list', (r) =>
      fromUpstream(async () => (await checked('resources/list')).passthrough('listResources', r.params)),
    );
    server.setRequestHandler('resources/read', (r) =>
      fromUpstream(async () => (await checked('resources/read')).passthrough('readResource', r.params)),
    );
    server.setRequestHandler('resources/templates/list', async () => ({ resourceTemplates: [] }));
    server.setRequestHandler('logging/setLevel', async () => ({}));
    return server;
  }

  server.setRequestHandler('resources/list', async () => ({
    resources: [
      {
        uri: CATALOG_URI,
        name: 'toolsets',
        title: 'toolshift toolset catalog',
        description: 'Every toolset with its description, tools, and whether it is enabled.',
        mimeType: 'application/json',
      },
    ],
  }));
  server.setRequestHandler('resources/templates/list', async () => ({ resourceTemplates: [] }));
  server.setRequestHandler('resources/read', async (request) => {
    if (request.params.uri !== CATALOG_URI) {
      // Never echo a URI of megabytes back: it is cut, the answer says how long it was.
      const uri = request.params.uri;
      const shown = uri.length > 256 ? `${uri.slice(0, 256)}… (${uri.length} characters)` : uri;
      throw new ResourceNotFoundError(shown, `Unknown resource; this server has ${CATALOG_URI}`);
    }
    const sessionId =
      mode.kind === 'modern'
        ? `${FACE_SESSION_PREFIXES.handle}list_${randomBytes(8).toString('hex')}`
        : await session();
    const { toolsets } = await gateway.listToolsets(sessionId);
    const text = JSON.stringify({
      toolsets: toolsets.map(({ id, description, tools, enabled }) => ({ id, description, tools, enabled })),
    });
    return { contents: [{ uri: CATALOG_URI, mimeType: 'application/json', text }] };
  });

  server.setRequestHandler('prompts/list', async () => ({ prompts: deps.prompts?.list() ?? [] }));
  server.setRequestHandler('prompts/get', async (request) => {
    const source = deps.prompts;
    // The same bounds as POST /mcp/prompts/{name}/render (contract.ts), said the same way.
    const name = request.params.name;
    if (name.length > LIMITS.id)
      throw new ProtocolError(INVALID_PARAMS, `name: at most ${LIMITS.id} characters (got ${name.length})`);
    const args = RenderPromptRequest.safeParse({ arguments: request.params.arguments ?? {} });
    if (!args.success) throw new ProtocolError(INVALID_PARAMS, describeIssues(args.error));
    if (!source) throw new ProtocolError(INVALID_PARAMS, `Unknown prompt ${name}`);
    let rendered: ReturnType<PromptSource['render']>;
    try {
      rendered = source.render(name, args.data.arguments);
    } catch (err) {
      throw new ProtocolError(INVALID_PARAMS, (err as Error).message);
    }
    return {
      description: rendered.description,
      messages: [{ role: 'user', content: { type: 'text', text: rendered.text } }],
    };
  });
  server.setRequestHandler('logging/setLevel', async () => ({}));
  return server;
}
