import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** An error with an HTTP status; `details` are merged into the JSON body next to `error`, `headers` sent with it. */
export class HttpError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}
