import { randomBytes } from 'node:crypto';
import type { CallToolResult, Server, Tool } from '@modelcontextprotocol/server';
import { HttpError } from '../../lib/http/http.ts';
import { LIMITS } from '../../lib/http/limits.ts';
import { extractContext, GENAI, inSpan, MCP, type Span, SpanKind } from '../../lib/telemetry/tracing.ts';
import { CALL_TOOL, FACE_SESSION_PREFIXES, MANAGE_TOOLSETS } from '../contract.ts';
import { validManageArgs } from '../core/manage-toolsets.ts';
import { Refusal } from '../refusals.ts';
import { adopt, type FaceLeg, type LegacyMode, named, usable } from './face-leg.ts';
import { HandleError } from './handles.ts';
import {
  callArgs,
  callTool,
  checkLength,
  legacyManageTool,
  modernManageTool,
  TOOL_NAME_MAX,
} from './meta-tools.ts';
import { errorResult, jsonResult, toCallToolResult, toMcpTool } from './results.ts';

// A leg's tools: the meta-tools (manage_toolsets, call_tool) of the modern and legacy legs, a view's own tools,
// each call answered from the gateway's rules with refusals as tool errors the model reads.

/** Answers tools/list and tools/call on `server`. */
export function serveTools(server: Server, leg: FaceLeg): void {
  server.setRequestHandler('tools/list', async () => ({ tools: await listTools(leg) }));
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
        attributes: { [MCP.method]: 'tools/call', [GENAI.toolName]: name, 'toolshift.face': leg.mode.kind },
        // No parent in `_meta`: the HTTP request's, when it carried one; else a trace of its own.
      },
      (span) => callFromClient(leg, name, args, span),
    );
  });
}

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

async function listTools(leg: FaceLeg): Promise<Tool[]> {
  const { mode, deps } = leg;
  if (mode.kind === 'modern') return [modernManageTool(deps.handles.idleText), callTool(true)];
  const active = (await usable(leg)).map(toMcpTool);
  if (mode.kind === 'view') return active;
  return [legacyManageTool(deps.handles.idleText), callTool(false), ...active];
}

function callFromClient(leg: FaceLeg, name: string, args: Record<string, unknown>, span: Span | undefined) {
  const { mode, deps, gateway } = leg;
  return refusalsAsErrors(async () => {
    if (mode.kind === 'modern') {
      if (name === MANAGE_TOOLSETS) return manageModern(leg, args, mode.credential);
      if (name !== CALL_TOOL) {
        throw new HandleError(`Unknown tool ${name}: this endpoint serves manage_toolsets and call_tool`);
      }
      if (typeof args.session !== 'string')
        throw new HandleError('call_tool needs `session`: the handle from manage_toolsets');
      checkLength('session', args.session, LIMITS.sessionId);
      const sessionId = await deps.handles.use(args.session, mode.credential);
      const call = callArgs(args);
      // Its tools/list never changes: a tool of an inactive toolset may activate it on the way.
      return toCallToolResult(
        await gateway.callTool(sessionId, call.name, call.arguments, { activate: true }),
      );
    }
    if (mode.kind === 'legacy' && name === MANAGE_TOOLSETS) return manageLegacy(leg, mode, args);
    if (mode.kind === 'legacy' && name === CALL_TOOL) {
      const call = callArgs(args);
      const sessionId = named(args.session) ? await adopt(leg, mode, args.session) : await leg.session(true);
      return toCallToolResult(await gateway.callTool(sessionId, call.name, call.arguments));
    }
    if (mode.kind === 'view' && !(await usable(leg)).some((t) => t.name === name)) {
      throw new HandleError(`Unknown tool ${name} in this view of ${mode.toolsets.join(', ')}`);
    }
    return toCallToolResult(await gateway.callTool(await leg.session(true), name, args));
  }).then((result) => {
    if (span && (result as { isError?: boolean }).isError) span.setAttribute(GENAI.errorType, 'tool_error');
    return result;
  });
}

/** The modern meta-tool: mints or checks the handle, runs the action, returns the usable tools in full. */
async function manageModern(leg: FaceLeg, args: Record<string, unknown>, credential: string | null) {
  const { deps, gateway } = leg;
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
  const usable = (await gateway.tools(handle)).map(toMcpTool);
  return jsonResult({ session: handle, ...res.result, tools: usable });
}

/**
 * The legacy meta-tool: acts in the named handle's session, or the connection's. The connection's first
 * change of toolsets takes a handle (a new one starts from the defaults, as the connection's own session
 * still is), so its toolsets outlive the connection; the result carries it.
 */
async function manageLegacy(leg: FaceLeg, legacy: LegacyMode, args: Record<string, unknown>) {
  const { deps, gateway } = leg;
  const { conn } = legacy;
  const { session: given, ...rest } = args;
  let sessionId = named(given) ? await adopt(leg, legacy, given) : await leg.session();
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
}
