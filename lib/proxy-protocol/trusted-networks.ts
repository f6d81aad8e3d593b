import { BlockList, isIPv6 } from 'node:net';

/**
 * The sources trusted to say who the client really is — PROXY headers from a load balancer, or
 * its `X-Forwarded-For` on a connection upgrade — from CIDRs and single addresses (the shape of
 * `proxy_protocol_trusted_networks`). Throws (Node's ERR_INVALID_ARG_VALUE) on an address that
 * is not one: callers build it before changing anything.
 */
export function trustedNetworks(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of cidrs) {
    const [address = '', bits] = entry.split('/');
    const type = isIPv6(address) ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  return list;
}

/** Whether `address` (IPv4, IPv6 or IPv4-mapped IPv6 text) is in `list`. */
export function isTrusted(list: BlockList, address: string): boolean {
  const lower = address.toLowerCase();
  // A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d; an IPv4 CIDR must still match them.
  if (lower.startsWith('::ffff:') && lower.includes('.')) return list.check(lower.slice(7), 'ipv4') || list.check(lower, 'ipv6');
  return list.check(address, isIPv6(address) ? 'ipv6' : 'ipv4');
}
