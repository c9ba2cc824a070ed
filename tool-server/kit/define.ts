import type { z } from 'zod';
import { describeIssues, jsonSchema } from '../../lib/http.ts';
import type { ToolAnnotations } from '../contract.ts';
import type { PathGuard } from '../guards/paths/guard.ts';
import type { DatabaseContext } from '../tools/database/tools.ts';
import type { GitHubSettings } from '../tools/git/github/api.ts';
import type { GitSettings } from '../tools/git/run.ts';
import type { WebContext } from '../tools/web/context.ts';

/** What every tool may use: the path guard and the service's limits. No sessions, no toolsets. */
export interface ToolContext {
  paths: PathGuard;
  maxReadBytes: number;
  /** The largest file read_media_file returns (it refuses larger ones); LIMITS.mediaBytes when absent. */
  maxMediaBytes?: number;
  /** The web tools' settings and seams (search API key, resolver, allowed hosts, limits); defaults when absent. */
  web?: WebContext;
  /** git_tools' timeout, output cap and the environment git starts from; defaults when absent. */
  git?: GitSettings;
  /** get_github_pull_request_info's API URL, optional token and timeout; api.github.com, no token when absent. */
  github?: GitHubSettings;
  /** database_tools' query processes, deadline and result caps; one process per call and defaults when absent. */
  databases?: DatabaseContext;
}

/** A tool's failure that the model can act on; its message becomes `ToolResult.error`. */
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Arguments that do not match a tool's schema: a malformed request (HTTP 400), not a tool failure. */
export class ToolInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

interface ToolSpec<S extends z.ZodType> {
  name: string;
  description: string;
  input: S;
  annotations: ToolAnnotations;
  execute(args: z.output<S>, ctx: ToolContext): Promise<unknown>;
}

/** A tool with its schema erased: `run` validates the arguments before executing. */
export interface Tool {
  name: string;
  description: string;
  input: z.ZodType;
  annotations: ToolAnnotations;
  run(args: unknown, ctx: ToolContext): Promise<unknown>;
}

/** Declares a tool as one value: schema, safety annotations and code side by side. */
export function defineTool<S extends z.ZodType>(spec: ToolSpec<S>): Tool {
  return {
    name: spec.name,
    description: spec.description,
    input: spec.input,
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
