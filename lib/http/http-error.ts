import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** An error with an HTTP status; `details` are merged into the JSON body next to `error`, `headers` sent with it. */
export class HttpError extends Error {
  readonly status: ContentfulStatusCode;
  readonly details: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(
    status: ContentfulStatusCode,
    message: string,
    details: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = status;
    this.details = details;
    this.headers = headers;
    this.name = new.target.name;
  }
}
