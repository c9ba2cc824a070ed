// Span and attribute names follow the OpenTelemetry GenAI and MCP semantic conventions, which are still marked
// "development": the few names used are copied here (GENAI, MCP) rather than imported from the incubating entry
// point of @opentelemetry/semantic-conventions, which may rename them in any release.

/** GenAI semantic-convention attribute names (opentelemetry.io/docs/specs/semconv/gen-ai/). */
export const GENAI = {
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  agentName: 'gen_ai.agent.name',
  agentId: 'gen_ai.agent.id',
  conversation: 'gen_ai.conversation.id',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  responseId: 'gen_ai.response.id',
  finishReasons: 'gen_ai.response.finish_reasons',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  cachedInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  cacheWriteInputTokens: 'gen_ai.usage.cache_creation.input_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  toolArguments: 'gen_ai.tool.call.arguments',
  toolResult: 'gen_ai.tool.call.result',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  errorType: 'error.type',
} as const;

/** MCP semantic-convention attribute names (opentelemetry.io/docs/specs/semconv/gen-ai/mcp/). */
export const MCP = {
  method: 'mcp.method.name',
  session: 'mcp.session.id',
  protocolVersion: 'mcp.protocol.version',
  requestId: 'jsonrpc.request.id',
} as const;

/** toolshift's own attributes, all under one namespace. */
export const TOOLSHIFT = {
  task: 'toolshift.task.id',
  session: 'toolshift.session.id',
  attempt: 'toolshift.task.attempt',
  status: 'toolshift.task.status',
  exposure: 'toolshift.exposure',
  requestId: 'toolshift.request.id',
  step: 'toolshift.step',
  toolset: 'toolshift.toolset',
  outcome: 'toolshift.tool.outcome',
  toolsetAction: 'toolshift.toolsets.action',
  toolsetsChanged: 'toolshift.toolsets.changed',
  toolsetsActive: 'toolshift.toolsets.active',
  tokensBefore: 'toolshift.tool_definition_tokens.before',
  tokensAfter: 'toolshift.tool_definition_tokens.after',
  toolTokens: 'toolshift.tool_definition_tokens',
  allToolsetsTokens: 'toolshift.all_toolsets_tool_tokens',
  approvalId: 'toolshift.approval.id',
  approvalKind: 'toolshift.approval.kind',
  approvalWaitMs: 'toolshift.approval.wait_ms',
  approved: 'toolshift.approval.approved',
  upstream: 'toolshift.upstream',
  goal: 'toolshift.task.goal',
} as const;
