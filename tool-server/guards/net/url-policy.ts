import { ToolError } from '../../kit/errors.ts';

// What a URL must look like before fetch_url connects anywhere: the model's own URL and every redirect target
// alike. The address behind the host is checked later, when the socket is opened (guarded-agent.ts).

/**
 * Parses and checks one URL: http or https only, no user name or password in it, and — for a redirect — no
 * step down from https to http. `from` is the URL that redirected here.
 */
export function checkUrl(raw: string, from?: URL): URL {
  let url: URL;
  try {
    url = from ? new URL(raw, from) : new URL(raw);
  } catch {
    const what = from ? `a redirect from ${from.href} points to` : 'the url is';
    throw new ToolError(`${capitalise(what)} ${JSON.stringify(raw)}, which is not a valid absolute URL`);
  }
  const where = from ? `redirect from ${from.href} to ${redact(url)}` : redact(url);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ToolError(`Refused ${where}: only http and https URLs can be fetched, not ${url.protocol}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new ToolError(
      `Refused ${where}: URLs with a user name or password are not fetched (credentials in URLs leak into logs and redirects)`,
    );
  }
  if (from?.protocol === 'https:' && url.protocol === 'http:') {
    throw new ToolError(`Refused ${where}: a redirect from https to http would drop encryption`);
  }
  return url;
}

/** A URL as it may be shown: user name and password replaced, so a refusal never repeats a credential. */
export function redact(url: URL): string {
  if (url.username === '' && url.password === '') return url.href;
  const copy = new URL(url.href);
  copy.username = copy.username ? '***' : '';
  copy.password = copy.password ? '***' : '';
  return copy.href;
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
