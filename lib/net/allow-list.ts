// FETCH_ALLOW_HOSTS (fetch_url) and AGENT_WEBHOOK_ALLOW_HOSTS (webhooks): the operator's explicit exceptions to
// the address policy, matched on the host as the URL names it (after the URL parser's normalisation), never on what a name resolves to — allowing 127.0.0.1
// does not let a public name that resolves to 127.0.0.1 through.

/** One allowed host, with a port when the entry named one. */
interface Entry {
  host: string;
  port?: number;
}

/** The parsed allow-list; `allows(host, port)` answers for one connection. */
export interface AllowList {
  readonly entries: readonly string[];
  allows(host: string, port: number): boolean;
}

/**
 * Parses entries like `127.0.0.1`, `localhost:8080`, `[::1]:3000`, `intranet.example`; throws on a bad one,
 * naming `setting` (the variable they came from).
 */
export function parseAllowList(entries: readonly string[], setting: string): AllowList {
  const parsed: Entry[] = entries.map((raw) => {
    const text = raw.trim();
    const bareV6 = !text.startsWith('[') && text.split(':').length > 2;
    const m = bareV6 ? [text, `[${text}]`] : text.match(/^(\[[^\]]*\]|[^:/@?#[\]]+)(?::(\d{1,5}))?$/);
    const host = m ? hostOf(m[1]) : undefined;
    const port = m?.[2] === undefined ? undefined : Number(m[2]);
    if (!host || (port !== undefined && (port < 1 || port > 65535))) {
      throw new Error(
        `${setting}: ${JSON.stringify(raw)} is not a host or host:port (e.g. 127.0.0.1:8080, [::1], intranet.example)`,
      );
    }
    return { host, port };
  });
  return {
    entries: entries.map((e) => e.trim()),
    allows(host, port) {
      const h = normaliseHost(host);
      return parsed.some((e) => e.host === h && (e.port === undefined || e.port === port));
    },
  };
}

/** A hostname as the URL parser writes it (lower case, IPv6 in brackets, IPv4 shorthands expanded). */
function hostOf(host: string): string | undefined {
  try {
    const url = new URL(`http://${host}/`);
    return url.hostname === '' ? undefined : url.hostname;
  } catch {
    return undefined;
  }
}

/** A connection's hostname (undici strips an IPv6 literal's brackets) in the same spelling as the entries. */
function normaliseHost(host: string): string {
  const bracketed = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return hostOf(bracketed) ?? host.toLowerCase();
}
