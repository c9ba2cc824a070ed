import { pino } from 'pino';
import pretty from 'pino-pretty';
import { currentRequestId } from '../http/request-id.ts';
import { logTraceIds } from './tracing.ts';

/** A pino logger. */
export type Logger = pino.Logger;

/** How log lines look: JSON lines, pretty (coloured on a terminal), or pretty only when stdout is a terminal. */
export type LogFormat = 'json' | 'pretty' | 'auto';

/** Where a credential could sit in a logged object; pino replaces it before the line is written. */
const REDACT = [
  'authorization',
  '*.authorization',
  '*.headers.authorization',
  '*.*.headers.authorization',
  'apiKey',
  '*.apiKey',
  'api_key',
  '*.api_key',
];

/**
 * One logger per service, named so the three services' lines can be told apart. Every line carries the
 * request id of the request it was written for (lib/http/request-id.ts), so one task can be followed across services,
 * and with tracing on the trace_id and span_id of the span it was written in.
 */
export function createLogger(
  service: string,
  level = 'info',
  destination?: pino.DestinationStream,
  format: LogFormat = 'json',
): Logger {
  const options: pino.LoggerOptions = {
    name: service,
    level,
    redact: { paths: REDACT, censor: '[redacted]' },
    // The request id, and (tracing on) the trace and span the line was written in, so it leads to its trace.
    mixin: () => {
      const id = currentRequestId();
      const ids = logTraceIds();
      return id ? { request_id: id, ...ids } : ids;
    },
  };
  const prettyWanted = format === 'pretty' || (format === 'auto' && !destination && process.stdout.isTTY);
  if (prettyWanted) {
    const colorize = !destination && process.stdout.isTTY === true && !process.env.NO_COLOR;
    return pino(
      options,
      pretty({
        colorize,
        destination: destination ?? 1,
        sync: true,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname',
      }),
    );
  }
  return destination ? pino(options, destination) : pino(options);
}

/**
 * What a value looks like without what it holds: `{path: "string(12)", content: "string(2048)"}`. Tool
 * arguments are logged this way only, so file contents, queries and secrets passed to tools stay out of logs.
 */
export function shapeOf(value: unknown, depth = 0): unknown {
  if (value === null) return 'null';
  if (Array.isArray(value))
    return depth >= 2 ? `array(${value.length})` : value.slice(0, 5).map((v) => shapeOf(v, depth + 1));
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (depth >= 2) return `object(${entries.length} keys)`;
    return Object.fromEntries(entries.slice(0, 30).map(([k, v]) => [k, shapeOf(v, depth + 1)]));
  }
  if (typeof value === 'string') return `string(${value.length})`;
  return typeof value;
}
