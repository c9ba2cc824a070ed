import { type Logger, shapeOf } from '../../lib/telemetry/log.ts';
import { recordToolCall } from '../../lib/telemetry/metrics.ts';
import type { TaskEvent } from '../contract.ts';
import type { AgentMetrics } from './metrics.ts';

// What the operator sees of a task besides its record: every event passes here once, turning into metrics
// and log lines. Retries and failures are logged at warn with their reason; tool arguments only by shape.

/** Updates metrics and writes log lines for one recorded event of `taskId`. */
export function observeEvent(
  event: TaskEvent,
  taskId: string,
  deps: { log: Logger; metrics?: AgentMetrics },
): void {
  // Event payloads are built by the loop in this service; their fields are read as the loop wrote them.
  const d = event.data as Data;
  if (deps.metrics) countEvent(event, d, deps.metrics);
  logEvent(event, d, taskId, deps.log);
}

// biome-ignore lint/suspicious/noExplicitAny: the payload shapes are fixed by loop.ts and tool-step.ts
type Data = Record<string, any>;

/** The metrics of one event. */
function countEvent(event: TaskEvent, d: Data, m: AgentMetrics): void {
  const seconds = (event.duration_ms ?? 0) / 1000;
  switch (event.type) {
    case 'task_started':
      m.running.inc();
      break;
    case 'model_request':
      m.toolDefinitionTokens.observe(d.tool_tokens);
      m.messageTokens.observe(d.message_tokens);
      break;
    case 'model_retry':
      m.modelRetries.inc({ status: d.status === null ? 'network' : String(d.status) });
      break;
    case 'model_call':
      m.modelLatency.observe(seconds);
      m.providerTokens.inc({ kind: 'prompt' }, d.usage?.prompt_tokens ?? 0);
      m.providerTokens.inc({ kind: 'completion' }, d.usage?.completion_tokens ?? 0);
      break;
    case 'tool_call':
      recordToolCall(m.base, d.name, d.ok ? 'ok' : 'failed', seconds);
      break;
    case 'toolset_change':
      if (d.action === 'ACTIVATE') for (const id of d.toolset_ids) m.toolsetActivations.inc({ toolset: id });
      break;
    case 'task_finished':
      m.running.dec();
      m.tasks.inc({ status: d.status });
      m.steps.observe(d.steps ?? 0);
      break;
    default:
      break;
  }
}

/** The log line of one event, if it has one; debug lines are built only when someone reads them. */
function logEvent(event: TaskEvent, d: Data, taskId: string, log: Logger): void {
  const debug = log.isLevelEnabled('debug');
  switch (event.type) {
    case 'task_started':
      log.info({ task: taskId, session: d.session_id, goal_chars: String(d.goal).length }, 'task started');
      break;
    case 'model_retry':
      log.warn(
        {
          task: taskId,
          step: d.step,
          attempt: d.attempt,
          status: d.status,
          delay_ms: d.delay_ms,
          reason: d.reason,
        },
        'model call failed; retrying',
      );
      break;
    case 'model_call':
      if (debug) {
        const calls = d.tool_calls.length;
        log.debug(
          { task: taskId, step: d.step, ms: event.duration_ms, attempts: d.attempts, tool_calls: calls },
          'model call',
        );
      }
      break;
    case 'tool_call':
      // The arguments' shape is worked out only when someone reads debug lines.
      if (debug)
        log.debug(
          { task: taskId, tool: d.name, ok: d.ok, ms: event.duration_ms, arguments: shapeOf(d.arguments) },
          'tool call',
        );
      break;
    case 'toolset_change':
      // The gateway logs every change of toolsets (a task's, an MCP client's) at info: here only at debug,
      // with the task's id, so `npm start` does not show each change twice.
      if (debug)
        log.debug(
          { task: taskId, action: d.action, toolsets: d.toolset_ids, active: d.active_toolsets },
          'toolsets changed',
        );
      break;
    case 'task_finished': {
      const line = { task: taskId, status: d.status, steps: d.steps, ms: event.duration_ms };
      if (d.status === 'completed') log.info(line, 'task ended');
      else log.warn({ ...line, reason: d.error }, `task ended: ${d.status}`);
      break;
    }
    default:
      break;
  }
}
