import { request } from 'undici';
import type { z } from 'zod';
import { traceHeaders } from '../telemetry/tracing.ts';
import type { RouteSpec } from './contract.ts';
import { currentRequestId, REQUEST_ID_HEADER } from './request-id.ts';

/** How one service reaches another: a base URL and a fetch (tests pass `app.request`). */
export interface ServiceEndpoint {
  baseUrl: string;
  fetch?: (input: string, init?: RequestInit) => Promise<Response>;
  headers?: Record<string, string>;
  /** How long one call may take before it fails with 504 (default 120 s). */
  timeoutMs?: number;
}

/** The response header naming the service that answered (agent-server, mcp-gateway, tool-server). */
export const SERVICE_HEADER = 'x-toolshift-service';

/** A non-2xx answer from another service, carrying its status and its `error` message. */
export class ServiceError extends Error {
  readonly status: number;
  readonly body: unknown;
  /**
   * The toolshift service that gave this answer (its SERVICE_HEADER); absent when something else did — a
   * balancer or proxy between the two — or no answer came at all.
   */
  service?: string;

  constructor(status: number, message: string, body: unknown, options?: ErrorOptions & { service?: string }) {
    super(message, options);
    this.status = status;
    this.body = body;
    if (options?.service) this.service = options.service;
    this.name = new.target.name;
  }
}

/** A non-2xx streamed answer (read outside callRoute) as a ServiceError: its `error` message, else its text. */
export async function errorOf(res: Response): Promise<ServiceError> {
  const text = await res.text();
  let message = text;
  try {
    message = JSON.parse(text).error ?? text;
  } catch {}
  return new ServiceError(res.status, message, text);
}

/**
 * `work` as a call in the same process: abandoned when `signal` aborts (with its reason), or after `timeoutMs`
 * with the 504 an HTTP call's deadline gives (callRoute) — the work itself goes on, as it would on the other
 * side of a socket.
 */
export function untilAborted<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  timeoutMs?: number,
): Promise<T> {
  if (!signal && timeoutMs === undefined) return work;
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(
            () => reject(new ServiceError(504, `did not answer within ${timeoutMs} ms`, undefined)),
            timeoutMs,
          );
    work.then(resolve, reject).finally(() => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    });
  });
}

/** The current request's id, so the next service logs the same one (lib/http/request-id.ts). */
export function requestIdHeader(): Record<string, string> {
  const id = currentRequestId();
  return id ? { [REQUEST_ID_HEADER]: id } : {};
}

type Ok<S extends RouteSpec> =
  S['responses'] extends Record<200, infer T extends z.ZodType>
    ? z.output<T>
    : S['responses'] extends Record<201, infer T extends z.ZodType>
      ? z.output<T>
      : unknown;

/** Why a call was abandoned: its deadline passed (as opposed to the caller's own signal). */
class DeadlinePassed extends Error {}

/**
 * One HTTP exchange: the endpoint's own fetch when it has one (tests serve apps in process), else undici's
 * request API over a kept-alive connection. Between services that is most of a call's cost, and fetch's
 * WHATWG streams, Request/Response objects and per-call composite signals cost about twice as much CPU.
 */
async function exchange(
  endpoint: ServiceEndpoint,
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal },
): Promise<{ status: number; text: string; service?: string }> {
  if (endpoint.fetch) {
    const res = await endpoint.fetch(url, init);
    return {
      status: res.status,
      text: await res.text(),
      service: res.headers.get(SERVICE_HEADER) ?? undefined,
    };
  }
  const res = await request(url, {
    method: init.method as 'GET',
    headers: init.headers,
    body: init.body,
    signal: init.signal,
  });
  const service = res.headers[SERVICE_HEADER];
  return {
    status: res.statusCode,
    text: await res.body.text(),
    service: typeof service === 'string' ? service : undefined,
  };
}

/** Calls a contract route and parses the 200 body with the contract's schema. */
export async function callRoute<S extends RouteSpec>(
  endpoint: ServiceEndpoint,
  spec: S,
  input: {
    params?: Record<string, string>;
    query?: Record<string, string | undefined>;
    /** The route's own headers (its contract's `headers`). */
    headers?: Record<string, string>;
    body?: unknown;
  } = {},
  init: { signal?: AbortSignal } = {},
): Promise<Ok<S>> {
  let urlPath = spec.path.replace(/\{(\w+)\}/g, (_, k: string) =>
    encodeURIComponent(input.params?.[k] ?? ''),
  );
  const query = Object.entries(input.query ?? {}).filter((e): e is [string, string] => e[1] !== undefined);
  if (query.length > 0) urlPath += `?${new URLSearchParams(query).toString()}`;
  const url = endpoint.baseUrl.replace(/\/$/, '') + urlPath;
  const timeoutMs = endpoint.timeoutMs ?? 120_000;
  // One controller and one timer per call: AbortSignal.timeout() and .any() are several times dearer.
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new DeadlinePassed()), timeoutMs);
  const onAbort = () => controller.abort(init.signal?.reason);
  if (init.signal?.aborted) onAbort();
  else init.signal?.addEventListener('abort', onAbort, { once: true });
  // Serialised before the call: a local failure here is ours to report, never "cannot reach".
  const body = input.body === undefined ? undefined : JSON.stringify(input.body);
  let res: { status: number; text: string; service?: string };
  try {
    res = await exchange(endpoint, url, {
      method: spec.method.toUpperCase(),
      headers: {
        'content-type': 'application/json',
        ...requestIdHeader(),
        ...traceHeaders(),
        ...endpoint.headers,
        ...input.headers,
      },
      body,
      signal: controller.signal,
    });
  } catch (err) {
    if (controller.signal.reason instanceof DeadlinePassed)
      throw new ServiceError(504, `${url} did not answer within ${timeoutMs} ms`, undefined);
    if (init.signal?.aborted) throw err;
    throw new ServiceError(502, `Cannot reach ${url}: ${(err as Error).message}`, undefined, { cause: err });
  } finally {
    clearTimeout(timer);
    init.signal?.removeEventListener('abort', onAbort);
  }
  const { text } = res;
  let answer: unknown;
  try {
    answer = text === '' ? undefined : JSON.parse(text);
  } catch {
    answer = text;
  }
  if (res.status < 200 || res.status > 299) {
    const message =
      typeof answer === 'object' && answer !== null && 'error' in answer
        ? String(answer.error)
        : `HTTP ${res.status}: ${text}`;
    throw new ServiceError(res.status, message, answer, { service: res.service });
  }
  const schema = spec.responses[200] ?? spec.responses[201];
  if (!schema) return answer as Ok<S>;
  const parsed = schema.safeParse(answer);
  if (!parsed.success) {
    throw new ServiceError(502, `Unexpected response from ${url}: ${parsed.error.message}`, answer);
  }
  return parsed.data as Ok<S>;
}
