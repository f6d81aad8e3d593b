import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';

/** One address to dial, as `connectTcp` takes it. */
export interface DialAddress {
  address: string;
  family: 4 | 6;
}

/**
 * The order to try a name's addresses in (RFC 8305, section 4): the resolver's first address,
 * then alternating families, each family in the resolver's order. A name whose first family is
 * broken (an IPv6 address nothing listens on, say) then costs one failed attempt, not one per
 * address of that family. Duplicates are dropped.
 */
export function dialOrder(found: readonly LookupAddress[]): DialAddress[] {
  const seen = new Set<string>();
  const byFamily: Record<4 | 6, DialAddress[]> = { 4: [], 6: [] };
  let first: 4 | 6 | undefined;
  for (const { address, family } of found) {
    if (seen.has(address)) continue;
    seen.add(address);
    const f: 4 | 6 = family === 6 ? 6 : 4;
    first ??= f;
    byFamily[f].push({ address, family: f });
  }
  if (first === undefined) return [];
  const [a, b] = first === 6 ? [byFamily[6], byFamily[4]] : [byFamily[4], byFamily[6]];
  const out: DialAddress[] = [];
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (i < a.length) out.push(a[i]!);
    if (i < b.length) out.push(b[i]!);
  }
  return out;
}

/** A resolver shaped like net.connect's `lookup` option (dns.lookup by default). */
export type Lookup = (
  host: string,
  options: { all: true },
  callback: (err: NodeJS.ErrnoException | null, found: string | LookupAddress[], family?: number) => void,
) => void;

/**
 * Every address of `host` from `lookup`, in dialOrder. A resolver that answers with one address
 * (a custom one may ignore `all`) is taken as that address.
 */
export function resolveDialOrder(
  host: string,
  lookup: Lookup,
  callback: (err: NodeJS.ErrnoException | null, addresses: DialAddress[]) => void,
): void {
  lookup(host, { all: true }, (err, found, family) => {
    if (err) return callback(err, []);
    callback(null, dialOrder(typeof found === 'string' ? [{ address: found, family: family ?? (isIP(found) === 6 ? 6 : 4) }] : found));
  });
}
