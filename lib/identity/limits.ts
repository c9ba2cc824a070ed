import { z } from 'zod';
import { HttpError } from '../http/http-error.ts';

// What a user or a team may use: tasks an hour, model tokens a day, tool calls a minute. Counted in the database
// (identity_usage: one row per subject, limit and window, bumped by one atomic statement), so a limit holds across
// every replica; windows are fixed, aligned to the epoch (an hour window starts on the hour, UTC).

export const LIMIT_NAMES = ['tasks_per_hour', 'model_tokens_per_day', 'tool_calls_per_minute'] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

/** Each limit's window in milliseconds. */
export const WINDOW_MS: Record<LimitName, number> = {
  tasks_per_hour: 3_600_000,
  model_tokens_per_day: 86_400_000,
  tool_calls_per_minute: 60_000,
};

/** A subject's limits; a limit absent is not limited. */
export const Limits = z.strictObject({
  tasks_per_hour: z.int().min(0).max(1_000_000_000).optional(),
  model_tokens_per_day: z.int().min(0).max(1_000_000_000_000).optional(),
  tool_calls_per_minute: z.int().min(0).max(1_000_000_000).optional(),
});
export type Limits = z.infer<typeof Limits>;

/** The start of the window of `limit` that holds `now`. */
export function windowStart(limit: LimitName, now: number): number {
  return now - (now % WINDOW_MS[limit]);
}

/** The seconds until the window holding `now` ends (at least 1). */
export function secondsLeft(limit: LimitName, now: number): number {
  return Math.max(1, Math.ceil((windowStart(limit, now) + WINDOW_MS[limit] - now) / 1000));
}

/** Who a limit belongs to, in messages: `user alice`, `team eng`. */
export interface LimitSubject {
  /** The usage row's subject: `user:<id>` or `team:<id>`. */
  key: string;
  /** In words. */
  label: string;
  limits: Limits;
}

/** A request or a task past a limit: 429, Retry-After, and which limit of whom. */
export class LimitReached extends HttpError {
  readonly limit: LimitName;
  readonly retryAfterS: number;
  /** Whose limit it is, in words (`user alice`, `team eng`). */
  readonly subject: string;
  constructor(limit: LimitName, subject: LimitSubject, retryAfterS: number) {
    const max = subject.limits[limit];
    super(
      429,
      `${subject.label} reached the limit ${limit} (${max}); it resets in ${retryAfterS} s`,
      { code: 'limit_reached', limit, subject: subject.label, max, retry_after_s: retryAfterS },
      { 'retry-after': String(retryAfterS) },
    );
    this.limit = limit;
    this.retryAfterS = retryAfterS;
    this.subject = subject.label;
  }
}

/** The limits of a JSON column (null or unreadable: none). */
export function limitsOf(text: string | null): Limits {
  if (!text) return {};
  const parsed = Limits.safeParse(JSON.parse(text));
  return parsed.success ? parsed.data : {};
}
