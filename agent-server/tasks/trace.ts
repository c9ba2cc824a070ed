import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import {
  GENAI,
  ROOT_CONTEXT,
  type ServiceTracing,
  type Span,
  type SpanHolder,
  SpanKind,
  SpanStatusCode,
  TOOLSHIFT,
  trace,
  tracingOf,
} from '../../lib/telemetry/tracing.ts';
import type { ModelReply, ModelRequest } from '../clients/model.ts';
import type { EventType, PendingApproval } from '../contract.ts';
import {
  attemptAttributes,
  attemptEndAttributes,
  chatAttributes,
  chatEndAttributes,
  latestMessages,
  linkFrom,
  messageParts,
  replyAttributes,
  retryAttributes,
  ScriptSpans,
  type StoredTrace,
  serverOf,
  type TaskTraceInfo,
  toolSpanAttributes,
  toolsetChangeAttributes,
  traceparentOf,
} from './trace-parts.ts';

export type { StoredTrace, TaskTraceInfo };

// A task's spans, following the OpenTelemetry GenAI conventions: an `invoke_agent` span per attempt, a
// `chat {model}` span per model call and an `execute_tool {name}` span per tool call under it. They are made
// from the task's own events (tasks/run.ts's emit), which already say when each model call and tool call
// starts and ends. A wait for a human ends the attempt (so a task that waits hours is not one day-long span);
// the decision starts the next attempt, a new trace linked to the one before. The task's HTTP calls to the
// gateway carry the current span (lib/telemetry/tracing.ts: the holder), so the gateway, the tool-server and any
// upstream MCP server join the same trace.

/** The agent's name in gen_ai.agent.name and the attempt span's name. */
const AGENT = 'toolshift';

export class TaskTrace implements SpanHolder {
  /** What the task's outgoing calls carry now (lib/telemetry/tracing.ts); undefined between attempts. */
  current: Span | undefined;
  private attempt: Span | undefined;
  private chat: Span | undefined;
  private tool: Span | undefined;
  private readonly script: ScriptSpans;
  private toolName: string | undefined;
  private attempts = 0;
  /** The attempt before, ended at a wait or by another worker: the next one links to it. */
  private previous: string | undefined;
  private pausedAt: number | undefined;
  /** The call that waits for a decision: its span is opened again when the decision comes. */
  private waiting: { id: string; name: string } | undefined;
  private readonly server: Record<string, string | number>;

  private readonly tracing: ServiceTracing;
  private readonly info: TaskTraceInfo;

  constructor(tracing: ServiceTracing, info: TaskTraceInfo) {
    this.tracing = tracing;
    this.info = info;
    this.server = serverOf(info.baseURL);
    this.script = new ScriptSpans(tracing);
  }

  /** The trace for a task, when the agent-server traces. */
  static for(info: TaskTraceInfo): TaskTrace | undefined {
    const tracing = tracingOf('agent-server');
    return tracing ? new TaskTrace(tracing, info) : undefined;
  }

  /** The current (or last) attempt, to store with a pause or a checkpoint. */
  stored(): StoredTrace | undefined {
    const parent = this.attempt ? traceparentOf(this.attempt) : this.previous;
    return parent ? { parent, attempt: this.attempts } : undefined;
  }

  /** Content as it goes on a span: redacted (whatever the content setting, secrets never go out). */
  private redacted(value: unknown): string {
    return this.tracing.redact(typeof value === 'string' ? value : JSON.stringify(value));
  }

  /** A text from outside (a tool's name, a provider's message) as it goes on a span: redacted and bounded. */
  private safe(value: unknown, max = 200): string {
    return this.tracing.safe(String(value ?? ''), max);
  }

  /**
   * Starts an attempt: the task's first, or its going on after a wait or on another worker (`previous`: the
   * attempt before, as stored).
   */
  begin(previous?: StoredTrace): void {
    if (this.attempt) return;
    if (previous) this.attempts = Math.max(this.attempts, previous.attempt);
    const before = linkFrom(previous?.parent ?? this.previous);
    this.attempts++;
    const span = this.tracing.tracer.startSpan(
      `invoke_agent ${AGENT}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: attemptAttributes(this.info, AGENT, this.attempts),
        links: before ? [{ context: before, attributes: { [TOOLSHIFT.status]: 'previous_attempt' } }] : [],
      },
      ROOT_CONTEXT,
    );
    this.attempt = span;
    this.current = span;
  }

  private child(name: string, kind: SpanKind, attributes: Record<string, string | number | boolean>) {
    if (!this.attempt) this.begin();
    return this.tracing.tracer.startSpan(
      name,
      { kind, attributes },
      trace.setSpan(ROOT_CONTEXT, this.attempt as Span),
    );
  }

  /** The request about to be sent (content, when captured). */
  request(request: ModelRequest): void {
    if (!this.chat || !this.tracing.content) return;
    try {
      this.chat.setAttribute(
        GENAI.inputMessages,
        latestMessages(request.messages, (v) => this.redacted(v)),
      );
    } catch {
      // Tracing never stops a task.
    }
  }

  /** The model's reply: what the response says about itself, and (content captured) the reply. */
  reply(reply: ModelReply): void {
    try {
      this.replied(reply);
    } catch {
      // Tracing never stops a task.
    }
  }

  private replied(reply: ModelReply): void {
    const span = this.chat;
    if (!span) return;
    span.setAttributes(replyAttributes(reply, (v) => this.safe(v)));
    if (this.tracing.content) {
      const message = messageParts({
        role: 'assistant',
        content: reply.content,
        tool_calls: reply.tool_calls,
      } as ChatCompletionMessageParam);
      span.setAttribute(
        GENAI.outputMessages,
        this.redacted([{ ...message, finish_reason: reply.finish_reason ?? 'stop' }]),
      );
    }
  }

  /** One event of the task, as tasks/run.ts records it. */
  event(type: EventType, data: Record<string, unknown>): void {
    switch (type) {
      case 'task_started':
        this.begin();
        if (this.tracing.content && typeof data.goal === 'string')
          this.attempt?.setAttribute(TOOLSHIFT.goal, this.redacted(data.goal));
        return;
      case 'task_resumed':
        this.begin();
        this.attempt?.addEvent('task_resumed', {
          'toolshift.worker': this.safe(data.worker, 100),
          'toolshift.calls_done': Number(data.calls_done ?? 0),
        });
        return;
      case 'model_request':
        this.openChat(data);
        return;
      case 'model_retry':
        this.chat?.addEvent('retry', retryAttributes(data, this.safe(data.reason, 500)));
        return;
      case 'model_call':
        this.closeChat(data);
        return;
      case 'tool_call_started':
        // A run_code script's call: a child of the run_code call's span.
        if (!data.in_script) this.openTool(String(data.tool_call_id), String(data.name));
        else if (this.tool)
          this.current = this.script.start(
            this.tool,
            this.safe(data.name),
            this.safe(data.tool_call_id, 100),
          );
        return;
      case 'tool_call':
        if (!data.in_script) this.toolCalled(data);
        else if (this.script.end(this.safe(data.tool_call_id, 100), (span) => this.outcome(span, data)))
          this.current = this.tool ?? this.attempt;
        return;
      case 'toolset_change': {
        const span = this.tool ?? this.openTool(String(data.tool_call_id), 'manage_toolsets');
        span.setAttributes(toolsetChangeAttributes(data));
        this.attempt?.addEvent('toolset_change', {
          [TOOLSHIFT.toolsetAction]: String(data.action),
          [TOOLSHIFT.toolsetsChanged]: (data.toolset_ids as string[]) ?? [],
        });
        this.closeTool();
        return;
      }
      case 'approval_needed':
        this.awaiting(data as unknown as PendingApproval);
        return;
      case 'approval_decided':
        this.decided(data);
        return;
      case 'task_finished':
        this.finish(String(data.status), typeof data.error === 'string' ? data.error : null, data.usage);
        return;
    }
  }

  /** A model call begins: its `chat` span (one still open never had its reply: it is superseded). */
  private openChat(data: Record<string, unknown>): void {
    this.endChat('superseded');
    this.chat = this.child(
      `chat ${this.info.model}`,
      SpanKind.CLIENT,
      chatAttributes(this.info, this.server, data),
    );
  }

  /** The model answered: its `chat` span ends with the reply's finish reason and tokens. */
  private closeChat(data: Record<string, unknown>): void {
    const span = this.chat;
    if (!span) return;
    span.setAttributes(chatEndAttributes(data));
    span.end();
    this.chat = undefined;
  }

  /** A tool call ended: its span says how, and (content captured) its arguments and result. */
  private toolCalled(data: Record<string, unknown>): void {
    const span = this.tool ?? this.openTool(String(data.tool_call_id), String(data.name));
    const name = this.safe(data.name);
    if (name !== this.toolName) {
      // A dispatch task's call_tool ran the tool it named: the span bears that tool's name.
      span.updateName(`execute_tool ${name}`);
      span.setAttribute(GENAI.toolName, name);
    }
    this.outcome(span, data);
    this.closeTool();
  }

  /** How a call ended, on its span: toolset, ok or error, and (content captured) its arguments and result. */
  private outcome(span: Span, data: Record<string, unknown>): void {
    if (typeof data.toolset === 'string') span.setAttribute(TOOLSHIFT.toolset, this.safe(data.toolset));
    span.setAttribute(TOOLSHIFT.outcome, data.ok ? 'ok' : 'error');
    if (!data.ok) {
      span.setAttribute(GENAI.errorType, 'tool_error');
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    if (this.tracing.content) {
      span.setAttribute(GENAI.toolArguments, this.redacted(data.arguments));
      span.setAttribute(GENAI.toolResult, this.redacted(data.output));
    }
  }

  /** A human decided: the next attempt begins, with the call that waited. */
  private decided(data: Record<string, unknown>): void {
    const waited = this.pausedAt === undefined ? undefined : Date.now() - this.pausedAt;
    this.pausedAt = undefined;
    this.begin();
    this.attempt?.setAttributes({
      [TOOLSHIFT.approvalId]: String(data.approval_id),
      [TOOLSHIFT.approved]: data.approved === true,
      ...(waited !== undefined ? { [TOOLSHIFT.approvalWaitMs]: waited } : {}),
    });
    // The call that waited runs now (or is reported not run): its span in the new attempt.
    if (this.waiting) this.openTool(this.waiting.id, this.waiting.name);
    this.waiting = undefined;
  }

  /** The task waits for a human: the call's span and the attempt end here; the decision starts the next. */
  awaiting(pending: PendingApproval): void {
    this.pausedAt = Date.now();
    // A call paused mid-reply goes on where it waited (no new tool_call_started): its span opens again then.
    // A call of unknown outcome waits before its reply is gone through again, which announces it afresh.
    this.waiting = this.tool && this.toolName ? { id: pending.call_id, name: this.toolName } : undefined;
    if (this.tool) {
      this.tool.setAttributes({
        [TOOLSHIFT.outcome]: 'awaiting_approval',
        [TOOLSHIFT.approvalId]: pending.approval_id,
        [TOOLSHIFT.approvalKind]: pending.kind,
      });
      this.closeTool();
    }
    if (this.attempt) {
      this.attempt.setAttributes({
        [TOOLSHIFT.status]: 'awaiting_approval',
        [TOOLSHIFT.approvalId]: pending.approval_id,
        [TOOLSHIFT.approvalKind]: pending.kind,
      });
      this.previous = traceparentOf(this.attempt);
      this.attempt.end();
      this.attempt = undefined;
    }
    this.current = undefined;
  }

  /**
   * Restarted while the task waited: the attempt before is the stored one (the reply is gone through again from
   * the call that waited, which announces it).
   */
  resumeWaiting(previous: StoredTrace | undefined): void {
    this.previous = previous?.parent;
    this.attempts = previous?.attempt ?? 0;
  }

  private openTool(id: string, toolName: string): Span {
    this.closeTool();
    // The model names the tool and the call: both bounded and redacted before they name a span.
    const name = this.safe(toolName);
    const span = this.child(
      `execute_tool ${name}`,
      SpanKind.INTERNAL,
      toolSpanAttributes(name, this.safe(id, 100)),
    );
    this.tool = span;
    this.toolName = name;
    this.current = span;
    return span;
  }

  private closeTool(): void {
    this.script.endAll();
    this.tool?.end();
    this.tool = undefined;
    this.toolName = undefined;
    this.current = this.attempt;
  }

  private endChat(why: string): void {
    if (!this.chat) return;
    this.chat.setAttribute(GENAI.errorType, why);
    this.chat.setStatus({ code: SpanStatusCode.ERROR, message: why });
    this.chat.end();
    this.chat = undefined;
  }

  /** The task ended (its status and error as recorded). */
  private finish(status: string, error: string | null, usage: unknown): void {
    if (!this.attempt) this.begin();
    const span = this.attempt as Span;
    // A model call or a tool call cut short by the end (a failure, a cancel, the time limit).
    if (this.chat) {
      if (error) this.chat.setStatus({ code: SpanStatusCode.ERROR, message: this.safe(error, 500) });
      this.chat.setAttribute(GENAI.errorType, status === 'failed' ? 'model_error' : status);
      this.chat.end();
      this.chat = undefined;
    }
    if (this.tool) {
      this.tool.setAttribute(TOOLSHIFT.outcome, status);
      this.closeTool();
    }
    span.setAttributes(attemptEndAttributes(status, usage));
    if (status !== 'completed') {
      span.setAttribute(GENAI.errorType, status);
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: this.safe(error ?? status, 500),
      });
    }
    span.end();
    this.attempt = undefined;
    this.current = undefined;
  }

  /** The task stops here without an end of its own (the process stopping, another worker going on). */
  release(why: string): void {
    if (this.chat) this.endChat(why);
    if (this.tool) this.closeTool();
    if (this.attempt) {
      this.attempt.setAttribute(TOOLSHIFT.status, why);
      this.attempt.end();
      this.attempt = undefined;
    }
    this.current = undefined;
  }
}
