import { lookup } from 'node:dns/promises';
import { ToolError } from '../../kit/errors.ts';
import type { AllowList } from './allow-list.ts';
import { classifyAddress, describeVerdict, ipLiteral } from './ip-policy.ts';

// Name resolution for fetch_url, behind one function type so tests can answer as a hostile DNS would
// (a rebinding server, a name with public and private answers) without any network.

/** One answer of a resolver, as dns.lookup({all: true}) gives it. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a hostname to every address it has; injectable through the tool context. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** The system resolver (getaddrinfo, so /etc/hosts counts), every address in the order it gives them. */
export const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true, verbatim: true });

/** A connection refused by the address policy; the message names the host, the address and why. */
export class AddressRefusedError extends ToolError {
  readonly code = 'ERR_ADDRESS_REFUSED';
}

/** The hint every refusal ends with, so the operator knows the one way to open a door on purpose. */
const ALLOW_HINT =
  'fetch_url only connects to public unicast addresses (an operator can allow a host with FETCH_ALLOW_HOSTS)';

/** Throws AddressRefusedError unless `address` is public unicast. */
export function assertPublic(host: string, address: string): void {
  const verdict = classifyAddress(address);
  if (verdict.public) return;
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  const why =
    bare === address ? describeVerdict(verdict) : `it resolves to ${address}, ${describeVerdict(verdict)}`;
  throw new AddressRefusedError(`Refused to connect to ${host}: ${why}; ${ALLOW_HINT}`);
}

/**
 * Resolves `host` and checks every answer: one non-public answer refuses the host, so a name that mixes a
 * public and a private address cannot be steered to the private one. An IP literal is checked without DNS.
 * An allow-listed host skips the check (the resolver still answers where to connect).
 */
export async function resolveChecked(
  host: string,
  port: number,
  deps: { resolve: Resolver; allow: AllowList },
): Promise<ResolvedAddress[]> {
  const literal = ipLiteral(host);
  if (literal) {
    if (!deps.allow.allows(host, port)) assertPublic(host, literal);
    return [{ address: literal, family: literal.includes(':') ? 6 : 4 }];
  }
  let answers: ResolvedAddress[];
  try {
    answers = await deps.resolve(host);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOTFOUND' || code === 'ENODATA' ? 'no such host' : (code ?? (err as Error).message);
    throw new ToolError(`Could not resolve ${host}: ${why}`);
  }
  if (answers.length === 0) throw new ToolError(`Could not resolve ${host}: no addresses`);
  if (!deps.allow.allows(host, port)) for (const a of answers) assertPublic(host, a.address);
  return answers;
}
