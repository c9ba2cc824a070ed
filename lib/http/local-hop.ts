import type { Logger } from '../telemetry/log.ts';
import { asCallee, inSpan, type Span, SpanKind, SpanStatusCode } from '../telemetry/tracing.ts';
import { ServiceError } from './http-client.ts';

// A call of another service's route made in the same process (the gateway's hot routes for the agent, the
// tool-server's calls for the gateway: start/stack.ts). What the request would have had around it is kept: the
// SERVER span a traced request gets (lib/http/http.ts serverSpans, named by the method and hono's path, with
// the status), the access line at debug, and the error as the caller's HTTP client would have read the answer
// (`asServiceError`: a ServiceError with the route's status and body).

export interface Hop {
  service: string;
  log: Logger;
  method: string;
  /** hono's path of the route (`/tools/:name`), as the span and the access line name it. */
  route: string;
  /** The path the request would have had. */
  path: string;
}

/** Runs `fn` as a request to `hop` would have run; `asServiceError` turns what it throws into the answer's error. */
export async function localHop<T>(
  hop: Hop,
  fn: (span: Span | undefined) => Promise<T>,
  asServiceError: (err: unknown) => unknown,
): Promise<T> {
  const started = performance.now();
  const run = async (span: Span | undefined) => {
    let status = 200;
    try {
      return await fn(span);
    } catch (err) {
      const answered = asServiceError(err);
      status = answered instanceof ServiceError ? answered.status : 500;
      throw answered;
    } finally {
      if (span) {
        span.setAttribute('http.response.status_code', status);
        if (status >= 500) {
          span.setAttribute('error.type', String(status));
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
      }
      const ms = Math.round(performance.now() - started);
      hop.log.debug({ method: hop.method, path: hop.path, status, ms, in_process: true }, 'request');
    }
  };
  return asCallee((traced) => {
    // As serverSpans: a span only where the caller's trace goes on.
    if (!traced) return run(undefined);
    const attributes = {
      'http.request.method': hop.method,
      'url.path': hop.path.slice(0, 1024),
      'http.route': hop.route,
    };
    return inSpan(hop.service, `${hop.method} ${hop.route}`, { kind: SpanKind.SERVER, attributes }, run);
  });
}
