import { randomBytes } from 'node:crypto';
import { ProtocolError, ResourceNotFoundError, type Server } from '@modelcontextprotocol/server';
import { describeIssues } from '../../lib/http/issues.ts';
import { LIMITS } from '../../lib/http/limits.ts';
import { FACE_SESSION_PREFIXES, RenderPromptRequest } from '../contract.ts';
import type { FaceLeg, PromptSource } from './face-leg.ts';

// A leg's resources and prompts: the catalog as a resource and the playbook prompts, or, in a view of one
// upstream server's toolset, that server's own.

/** The catalog as an MCP resource, for clients that want context without a tool call. */
const CATALOG_URI = 'toolshift://toolsets';

/** JSON-RPC's Invalid Params code. */
const INVALID_PARAMS = -32602;

/**
 * In a view of one upstream server's toolset, passes that server's own prompts and resources through; false
 * (nothing answered) for any other leg.
 */
export function servePassthrough(server: Server, leg: FaceLeg): boolean {
  const { mode, gateway } = leg;
  // Each read checked (enabled, active in the view) and audited by the gateway first: a disabled toolset's
  // server is never started by a view, and a held session stops getting them the moment it is disabled.
  const viewed = mode.kind === 'view' && mode.toolsets.length === 1 ? mode.toolsets[0] : undefined;
  if (viewed === undefined || !gateway.upstream(viewed)) return false;
  const checked = async (method: string) => gateway.viewUpstream(await leg.session(), viewed, method);
  const fromUpstream = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ProtocolError) throw err;
      throw new ProtocolError(-32603, (err as Error).message);
    }
  };
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
  return true;
}

/** The catalog as a resource, for the session the leg acts in. */
export function serveCatalog(server: Server, leg: FaceLeg): void {
  const { mode, gateway } = leg;
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
        : await leg.session();
    const { toolsets } = await gateway.listToolsets(sessionId);
    const text = JSON.stringify({
      toolsets: toolsets.map(({ id, description, tools, enabled }) => ({ id, description, tools, enabled })),
    });
    return { contents: [{ uri: CATALOG_URI, mimeType: 'application/json', text }] };
  });
}

/** The playbook prompts, bounded as POST /mcp/prompts/{name}/render is. */
export function servePrompts(server: Server, prompts: PromptSource | undefined): void {
  server.setRequestHandler('prompts/list', async () => ({ prompts: prompts?.list() ?? [] }));
  server.setRequestHandler('prompts/get', async (request) => {
    const source = prompts;
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
}
