/**
 * Open connections per client address, for `maxConnectionsPerSource`: one host (a scanner, a
 * slowloris) must not take every slot of `maxConnections`. Entries exist only while a connection
 * from that address is open, so the map is bounded by the open connections themselves.
 */
export class SourceLimiter {
  private readonly counts = new Map<string, number>();
  private readonly owners = new Map<object, string>();

  /** `max` 0 or less: no limit (nothing is tracked). */
  constructor(readonly max: number) {}

  /** Counts `owner` against `address`; false (and nothing counted) when the address is at `max`. */
  admit(owner: object, address: string): boolean {
    if (this.max <= 0) return true;
    const key = sourceKey(address);
    const n = this.counts.get(key) ?? 0;
    if (n >= this.max) return false;
    this.counts.set(key, n + 1);
    this.owners.set(owner, key);
    return true;
  }

  /** Forgets `owner` (idempotent; a no-op for owners never admitted). */
  release(owner: object): void {
    const key = this.owners.get(owner);
    if (key === undefined) return;
    this.owners.delete(owner);
    const n = (this.counts.get(key) ?? 1) - 1;
    if (n <= 0) this.counts.delete(key);
    else this.counts.set(key, n);
  }

  /** Addresses with at least one open connection. */
  get sources(): number {
    return this.counts.size;
  }
}

/**
 * The address a connection counts against: an IPv4-mapped IPv6 address (a dual-stack listener's
 * view of an IPv4 client) is the same host as its IPv4 form; IPv6 text is compared lower-cased.
 */
export function sourceKey(address: string): string {
  const lower = address.toLowerCase();
  return lower.startsWith('::ffff:') && lower.includes('.') ? lower.slice(7) : lower;
}
