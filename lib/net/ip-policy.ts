import ipaddr from 'ipaddr.js';

// Which IP addresses fetch_url and webhooks may connect to: public unicast only. ipaddr.js names the special ranges; the
// rules on top of it are the ones it leaves open (IPv4 inside IPv6, and IPv6 outside global unicast).

/** The verdict on one address: `range` names why it is refused (ipaddr.js's range names, plus ours). */
export interface AddressVerdict {
  address: string;
  public: boolean;
  range: string;
}

const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');
const NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

/** Plain words for the ranges a refusal names, so the model (and the operator) sees why. */
const RANGE_WORDS: Record<string, string> = {
  unspecified: 'the unspecified address',
  broadcast: 'the broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address (this includes the cloud metadata service 169.254.169.254)',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT address (100.64.0.0/10)',
  private: 'a private address (RFC 1918)',
  reserved: 'a reserved or documentation address',
  uniqueLocal: 'an IPv6 unique local address (fc00::/7)',
  deprecatedSiteLocal: 'an IPv6 site-local address (fec0::/10)',
  '6to4': 'a 6to4 address (2002::/16, which embeds an IPv4 address)',
  teredo: 'a Teredo address (2001::/32, which embeds an IPv4 address)',
  notGlobalUnicast: 'an IPv6 address outside global unicast 2000::/3 (IPv4-compatible ::a.b.c.d among them)',
  invalid: 'not an IP address',
};

/**
 * Classifies an address as dialled or resolved (any textual form ipaddr.js parses). An IPv4-mapped
 * (::ffff:a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) address is judged by the IPv4 address inside it.
 */
export function classifyAddress(address: string): AddressVerdict {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.parse(address);
  } catch {
    return { address, public: false, range: 'invalid' };
  }
  if (ip.kind() === 'ipv6') {
    const v6 = ip as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress() || v6.match(NAT64)) {
      const inner = classifyAddress(ipv4Inside(v6));
      return { address, public: inner.public, range: inner.public ? 'unicast' : `IPv4 ${inner.range}` };
    }
    const range = v6.range();
    if (range !== 'unicast') return { address, public: false, range };
    if (!v6.match(GLOBAL_UNICAST)) return { address, public: false, range: 'notGlobalUnicast' };
    return { address, public: true, range };
  }
  const range = (ip as ipaddr.IPv4).range();
  return { address, public: range === 'unicast', range };
}

/** The IPv4 address in the low 32 bits of an IPv6 address. */
function ipv4Inside(v6: ipaddr.IPv6): string {
  const bytes = v6.toByteArray().slice(12);
  return bytes.join('.');
}

/** "a loopback address": what kind of address a refused one is, in words. */
export function describeVerdict(v: AddressVerdict): string {
  const inner = v.range.startsWith('IPv4 ') ? v.range.slice(5) : undefined;
  if (inner) return `an IPv6 form of an IPv4 address that is ${RANGE_WORDS[inner] ?? inner}`;
  return RANGE_WORDS[v.range] ?? `in the special range "${v.range}"`;
}

/** True when `host` (a URL hostname, brackets allowed) is an IP literal rather than a name. */
export function ipLiteral(host: string): string | undefined {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return ipaddr.isValid(bare) && (bare.includes(':') || ipaddr.IPv4.isValidFourPartDecimal(bare))
    ? bare
    : undefined;
}
