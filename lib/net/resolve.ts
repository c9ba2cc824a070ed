import { lookup } from 'node:dns/promises';
import type { AllowList } from './allow-list.ts';
import { classifyAddress, describeVerdict, ipLiteral } from './ip-policy.ts';

// Name resolution for the guarded connections (the tool-server's fetch_url, the agent-server's webhooks),
// behind one function type so tests can answer as a hostile DNS would (a rebinding server, a name with public
// and private answers) without any network.

/** One answer of a resolver, as dns.lookup({all: true}) gives it. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a hostname to every address it has; injectable through the tool context. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** The system resolver (getaddrinfo, so /etc/hosts counts), every address in the order it gives them. */
export const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true, verbatim: true });

/** A host the guard will not connect to (it has no address, or a refused one); the message says why. */
export class NetRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A connection refused by the address policy; the message names the host, the address and why. */
export class AddressRefusedError extends NetRefusal {
  readonly code = 'ERR_ADDRESS_REFUSED';
}

/** What the guard checks with: how to resolve names, which hosts the operator allowed, and what to tell them. */
export interface CheckOptions {
  resolve: Resolver;
  allow: AllowList;
  /**
   * The end of every refusal, so the operator knows the one way to open a door on purpose (e.g. "fetch_url only
   * connects to public unicast addresses (an operator can allow a host with FETCH_ALLOW_HOSTS)").
   */
  hint: string;
}

/** Throws AddressRefusedError unless `address` is public unicast. */
export function assertPublic(host: string, address: string, hint: string): void {
  const verdict = classifyAddress(address);
  if (verdict.public) return;
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  const why =
    bare === address ? describeVerdict(verdict) : `it resolves to ${address}, ${describeVerdict(verdict)}`;
  throw new AddressRefusedError(`Refused to connect to ${host}: ${why}; ${hint}`);
}

/**
 * Resolves `host` and checks every answer: one non-public answer refuses the host, so a name that mixes a
 * public and a private address cannot be steered to the private one. An IP literal is checked without DNS.
 * An allow-listed host skips the check (the resolver still answers where to connect).
 */
export async function resolveChecked(
  host: string,
  port: number,
  deps: CheckOptions,
): Promise<ResolvedAddress[]> {
  const literal = ipLiteral(host);
  if (literal) {
    if (!deps.allow.allows(host, port)) assertPublic(host, literal, deps.hint);
    return [{ address: literal, family: literal.includes(':') ? 6 : 4 }];
  }
  let answers: ResolvedAddress[];
  try {
    answers = await deps.resolve(host);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOTFOUND' || code === 'ENODATA' ? 'no such host' : (code ?? (err as Error).message);
    throw new NetRefusal(`Could not resolve ${host}: ${why}`);
  }
  if (answers.length === 0) throw new NetRefusal(`Could not resolve ${host}: no addresses`);
  if (!deps.allow.allows(host, port)) for (const a of answers) assertPublic(host, a.address, deps.hint);
  return answers;
}
