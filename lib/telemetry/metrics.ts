import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { z } from 'zod';
import { HttpError } from '../http/http-error.ts';

// Prometheus metrics, one registry per service (never prom-client's global one, so tests and the three
// services in one process do not mix). installBase() serves it at GET /metrics behind the service's checks.

/** Durations from a millisecond tool call to a multi-minute model call. */
const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** A service's metrics: the registry and the series every service records. */
export interface Metrics {
  registry: Registry;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  httpDuration: Histogram<'method' | 'route'>;
  toolCalls: Counter<'tool' | 'outcome'>;
  toolCallDuration: Histogram<'tool' | 'outcome'>;
}

/** What a tool call came to: ran and succeeded, ran and failed, refused before running, or broke. */
export type ToolOutcome = 'ok' | 'failed' | 'refused' | 'error';

/** A fresh registry with the HTTP and tool-call series; `processMetrics` adds Node's own (CPU, memory, event loop). */
export function createMetrics(opts: { processMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (opts.processMetrics) collectDefaultMetrics({ register: registry, prefix: 'toolshift_' });
  return {
    registry,
    httpRequests: new Counter({
      name: 'toolshift_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'toolshift_http_request_duration_seconds',
      help: 'Time to answer an HTTP request (an SSE stream counts until its headers are sent)',
      labelNames: ['method', 'route'],
      buckets: SECONDS,
      registers: [registry],
    }),
    toolCalls: new Counter({
      name: 'toolshift_tool_calls_total',
      help: 'Tool calls by tool and outcome (ok, failed: the tool reported an error, refused, error)',
      labelNames: ['tool', 'outcome'],
      registers: [registry],
    }),
    toolCallDuration: new Histogram({
      name: 'toolshift_tool_call_duration_seconds',
      help: 'Duration of tool calls by tool and outcome',
      labelNames: ['tool', 'outcome'],
      buckets: SECONDS,
      registers: [registry],
    }),
  };
}

/** Records one tool call's outcome and duration. */
export function recordToolCall(m: Metrics, tool: string, outcome: ToolOutcome, seconds: number): void {
  m.toolCalls.inc({ tool, outcome });
  m.toolCallDuration.observe({ tool, outcome }, seconds);
}

/**
 * Runs a tool call and records it. A refusal for an unknown tool is recorded under `tool="unknown"`, so a
 * caller inventing names cannot grow the series without bound.
 */
export async function observeToolCall<T extends { success: boolean }>(
  m: Metrics,
  tool: string,
  run: () => Promise<T>,
): Promise<T> {
  const started = performance.now();
  const elapsed = () => (performance.now() - started) / 1000;
  try {
    const result = await run();
    recordToolCall(m, tool, result.success ? 'ok' : 'failed', elapsed());
    return result;
  } catch (err) {
    const refused = err instanceof HttpError || (err as { status?: unknown }).status !== undefined;
    const status = (err as { status?: number }).status;
    recordToolCall(m, status === 404 ? 'unknown' : tool, refused ? 'refused' : 'error', elapsed());
    throw err;
  }
}

/** The /metrics route every service serves (declared here once; installBase registers it). */
export const metricsRoute = {
  method: 'get',
  path: '/metrics',
  summary:
    'Prometheus metrics (text exposition format); needs the service’s token when it has one, like every route',
  produces: 'text/plain',
  responses: { 200: z.string() },
} as const;
