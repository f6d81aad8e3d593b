/**
 * Open connections per client address, for `maxConnectionsPerSource` and the fair share under
 * pressure (connection-budget.ts): one host (a scanner, a slowloris) must not take every slot.
 * Every connection is counted, so a limit that starts to apply (pressure, a reload) sees the ones
 * already open. Entries exist only while a connection from that address is open, so the maps are
 * bounded by the open connections themselves.
 */
export class SourceCounts {
  private readonly counts = new Map<string, number>();
  private readonly owners = new Map<object, string>();

  /**
   * Counts `owner` against `address`; false (and nothing counted) when the address already has
   * `limit` open connections (0 or less: no limit).
   */
  admit(owner: object, address: string, limit = 0): boolean {
    const key = sourceKey(address);
    const n = this.counts.get(key) ?? 0;
    if (limit > 0 && n >= limit) return false;
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

  /** Open connections counted against `address`. */
  count(address: string): number {
    return this.counts.get(sourceKey(address)) ?? 0;
  }

  /** Open connections from the same address as `owner`; undefined when `owner` is not counted. */
  countOf(owner: object): number | undefined {
    const key = this.owners.get(owner);
    return key === undefined ? undefined : (this.counts.get(key) ?? 0);
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
