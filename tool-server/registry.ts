import { HttpError } from '../lib/http/http.ts';
import type { ToolDefinition, ToolResult } from './contract.ts';
import { outputSchemaOf, parametersOf, type Tool, type ToolContext } from './kit/define.ts';
import { ToolError, ToolInputError } from './kit/errors.ts';

/** The tool-server's set of tools: their definitions, and one place that runs a call and times it. */
export interface ToolRegistry<C extends ToolContext = ToolContext> {
  definitions(): ToolDefinition[];
  call(name: string, args: unknown, ctx: C): Promise<ToolResult>;
}

/** Turns an error thrown by a tool into text the model can act on (tools throw ToolError for known cases). */
function failureMessage(err: unknown): string {
  if (err instanceof ToolError) return err.message;
  return `Tool failed: ${err instanceof Error ? err.message : String(err)}`;
}

/** Builds the registry; refuses two tools with one name. */
export function createRegistry<C extends ToolContext>(tools: readonly Tool<C>[]): ToolRegistry<C> {
  const byName = new Map<string, Tool<C>>();
  for (const tool of tools) {
    if (byName.has(tool.name)) throw new Error(`Two tools are named ${tool.name}`);
    byName.set(tool.name, tool);
  }
  const definitions = tools.map((t) => ({
    name: t.name,
    description: t.description,
    parameters: parametersOf(t),
    outputSchema: outputSchemaOf(t),
    annotations: t.annotations,
  }));
  return {
    definitions: () => definitions,
    async call(name, args, ctx) {
      const tool = byName.get(name);
      if (!tool)
        throw new HttpError(404, `Unknown tool ${name}; tools here: ${[...byName.keys()].join(', ')}`);
      const started = performance.now();
      const elapsed = () => Math.round((performance.now() - started) * 100) / 100;
      try {
        // No lock here: tools of other kinds (web, git, database) never wait for one another. The file tools
        // take the path guard's own lock (see tool-server/tools/files/tools.ts).
        const result = await tool.run(args, ctx);
        return { success: true, result, execution_time_ms: elapsed() };
      } catch (err) {
        if (err instanceof ToolInputError) throw new HttpError(400, err.message);
        return { success: false, result: null, error: failureMessage(err), execution_time_ms: elapsed() };
      }
    },
  };
}
