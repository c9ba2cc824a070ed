import type { z } from 'zod';
import { jsonSchema } from '../../lib/http/http.ts';
import { describeIssues } from '../../lib/http/issues.ts';
import type { ToolAnnotations } from '../contract.ts';
import type { PathGuard } from '../guards/paths/guard.ts';
import { ToolInputError } from './errors.ts';

// The tool kit: how a tool is declared (schema, annotations and code as one value), the context every tool
// is called with, and the annotation presets. A family that needs settings of its own (web, git, databases)
// declares them as its own extension of ToolContext; the server's wiring (tools/native.ts) puts them together.
// Nothing here knows a family.

/** What every tool may use: the path guard and the service's limits. No sessions, no toolsets. */
export interface ToolContext {
  paths: PathGuard;
  maxReadBytes: number;
  /** The largest file read_media_file returns (it refuses larger ones); LIMITS.mediaBytes when absent. */
  maxMediaBytes?: number;
  /** Whose call it is (SESSION_HEADER), so shared pools serve sessions in turn; absent: one shared key. */
  session?: string;
}

// Annotation presets (MCP tool annotations; the gateway's policy and the clients read them), by what a tool does.

/** Only looks: such calls may run side by side (see registry.ts). */
export const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true } as const;

/** Only reads, from outside toolshift's own world (the web, GitHub). */
export const READ_ONLY_OPEN_WORLD = { ...READ_ONLY, openWorldHint: true } as const;

/** Adds without taking anything away; the same call twice changes nothing more. */
export const ADDS = { readOnlyHint: false, destructiveHint: false, idempotentHint: true } as const;

/** Replaces what is there with what the call says; the same call twice leaves the same result. */
export const OVERWRITES = { readOnlyHint: false, destructiveHint: true, idempotentHint: true } as const;

/** Changes or removes what is there; the same call twice does not leave the same result. */
export const CHANGES = { readOnlyHint: false, destructiveHint: true, idempotentHint: false } as const;

interface ToolSpec<S extends z.ZodType, O extends z.ZodType, C extends ToolContext> {
  name: string;
  description: string;
  input: S;
  /**
   * What a successful call returns (its `result`), listed as the tool's output schema. Results are not checked
   * against it when the tool runs: the type of `execute` and the tests keep the two in step.
   */
  output: O;
  annotations: ToolAnnotations;
  execute(args: z.output<S>, ctx: C): Promise<z.output<O>>;
}

/** A tool with its schema erased: `run` validates the arguments before executing. `C`: the context it needs. */
export interface Tool<C extends ToolContext = ToolContext> {
  name: string;
  description: string;
  input: z.ZodType;
  output: z.ZodType;
  annotations: ToolAnnotations;
  run(args: unknown, ctx: C): Promise<unknown>;
}

/** Declares a tool as one value: schema, safety annotations and code side by side. */
export function defineTool<S extends z.ZodType, O extends z.ZodType, C extends ToolContext = ToolContext>(
  spec: ToolSpec<S, O, C>,
): Tool<C> {
  return {
    name: spec.name,
    description: spec.description,
    input: spec.input,
    output: spec.output,
    annotations: spec.annotations,
    async run(args, ctx) {
      const parsed = spec.input.safeParse(args ?? {});
      if (!parsed.success) {
        throw new ToolInputError(`Invalid arguments for ${spec.name}: ${describeIssues(parsed.error)}`);
      }
      return spec.execute(parsed.data, ctx);
    },
  };
}

/** The JSON Schema of a tool's arguments, as sent to models. */
export function parametersOf(tool: Tool): Record<string, unknown> {
  return jsonSchema(tool.input, 'input');
}

/** The JSON Schema of what a tool's call returns, for a caller that writes code against the result. */
export function outputSchemaOf(tool: Tool): Record<string, unknown> {
  return jsonSchema(tool.output, 'output');
}
