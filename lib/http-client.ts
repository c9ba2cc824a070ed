import type { z } from 'zod';
import type { RouteSpec } from './http.ts';
import { currentRequestId, REQUEST_ID_HEADER } from './request-id.ts';

/** How one service reaches another: a base URL and a fetch (tests pass `app.request`). */
export interface ServiceEndpoint {
  baseUrl: string;
  fetch?: (input: string, init?: RequestInit) => Promise<Response>;
  headers?: Record<string, string>;
  /** How long one call may take before it fails with 504 (default 120 s). */
  timeoutMs?: number;
}

/** A non-2xx answer from another service, carrying its status and its `error` message. */
export class ServiceError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: unknown,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The current request's id, so the next service logs the same one (lib/request-id.ts). */
export function requestIdHeader(): Record<string, string> {
  const id = currentRequestId();
  return id ? { [REQUEST_ID_HEADER]: id } : {};
}

type Ok<S extends RouteSpec> =
  S['responses'] extends Record<200, infer T extends z.ZodType> ? z.output<T> : unknown;

/** Calls a contract route and parses the 200 body with the contract's schema. */
export async function callRoute<S extends RouteSpec>(
  endpoint: ServiceEndpoint,
  spec: S,
  input: { params?: Record<string, string>; query?: Record<string, string | undefined>; body?: unknown } = {},
  init: { signal?: AbortSignal } = {},
): Promise<Ok<S>> {
  let urlPath = spec.path.replace(/\{(\w+)\}/g, (_, k: string) =>
    encodeURIComponent(input.params?.[k] ?? ''),
  );
  const query = Object.entries(input.query ?? {}).filter((e): e is [string, string] => e[1] !== undefined);
  if (query.length > 0) urlPath += `?${new URLSearchParams(query).toString()}`;
  const doFetch = endpoint.fetch ?? fetch;
  const url = endpoint.baseUrl.replace(/\/$/, '') + urlPath;
  const timeoutMs = endpoint.timeoutMs ?? 120_000;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = init.signal ? AbortSignal.any([init.signal, deadline]) : deadline;
  // Serialised before the call: a local failure here is ours to report, never "cannot reach".
  const body = input.body === undefined ? undefined : JSON.stringify(input.body);
  let res: Response;
  let text: string;
  try {
    res = await doFetch(url, {
      method: spec.method.toUpperCase(),
      headers: { 'content-type': 'application/json', ...requestIdHeader(), ...endpoint.headers },
      body,
      signal,
    });
    text = await res.text();
  } catch (err) {
    if (deadline.aborted)
      throw new ServiceError(504, `${url} did not answer within ${timeoutMs} ms`, undefined);
    if (init.signal?.aborted) throw err;
    throw new ServiceError(502, `Cannot reach ${url}: ${(err as Error).message}`, undefined, { cause: err });
  }
  let answer: unknown;
  try {
    answer = text === '' ? undefined : JSON.parse(text);
  } catch {
    answer = text;
  }
  if (!res.ok) {
    const message =
      typeof answer === 'object' && answer !== null && 'error' in answer
        ? String(answer.error)
        : `HTTP ${res.status}: ${text}`;
    throw new ServiceError(res.status, message, answer);
  }
  const schema = spec.responses[200];
  if (!schema) return answer as Ok<S>;
  const parsed = schema.safeParse(answer);
  if (!parsed.success) {
    throw new ServiceError(502, `Unexpected response from ${url}: ${parsed.error.message}`, answer);
  }
  return parsed.data as Ok<S>;
}
