import { HttpError } from '../lib/http/http-error.ts';
import type { RefusalCode } from './contract.ts';

// The gateway's rules refuse with a Refusal: a code (contract.ts RefusalCode) and a message the model or the
// operator can act on. The rules know nothing of HTTP: the REST routes map each code to one status
// (REFUSAL_STATUS, app.ts), and the MCP face turns any refusal into a tool error with its message.

export class Refusal extends Error {
  readonly code: RefusalCode;
  /** More for the error body (a pending `approval`, `valid_ids`, `retry_after_s`). */
  readonly details: Record<string, unknown>;

  constructor(code: RefusalCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.code = code;
    this.details = details;
    this.name = new.target.name;
  }
}

/** The HTTP status of each refusal, in one table. */
export const REFUSAL_STATUS = {
  invalid_arguments: 400,
  invalid_config: 400,
  unknown_toolset: 400,
  unknown_tool: 404,
  not_found: 404,
  inactive: 403,
  disabled: 403,
  denied: 403,
  withheld: 403,
  approval_needed: 409,
  direct_call_only: 403,
  consent_required: 409,
  over_budget: 409,
  rate_limited: 429,
  conflict: 409,
  unavailable: 409,
  upstream_failed: 502,
  in_progress: 409,
  fenced: 409,
} as const satisfies Record<RefusalCode, number>;

/** A refusal of the gateway's rules as an HTTP error: its status from REFUSAL_STATUS, its code in the body. */
export function refusalAsHttpError(err: unknown): HttpError | undefined {
  if (!(err instanceof Refusal)) return undefined;
  const retry = err.details.retry_after_s;
  return new HttpError(
    REFUSAL_STATUS[err.code],
    err.message,
    { code: err.code, ...err.details },
    typeof retry === 'number' ? { 'retry-after': String(retry) } : {},
  );
}
