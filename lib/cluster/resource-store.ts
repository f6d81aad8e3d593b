/**
 * The cluster's resources (the maintenance window, roles, admin users), kept in the store the
 * proxies already share, so every proxy of a cluster reads the same ones: in memory for a proxy
 * alone, in Redis for several. Each write gives the resource the next revision of one counter for
 * the whole store, so "which is newer" never depends on clocks, and a reader that polls sees every
 * change without a pub/sub message having to arrive.
 *
 * The store holds documents; what a valid one is, and who may write it, is lib/admin's.
 */

/** One stored resource. */
export interface StoredResource {
  kind: string;
  name: string;
  /** The store-wide revision of the write that made this version. */
  revision: number;
  /** The manifest as validated (plain JSON: mappings, lists, strings, numbers, booleans). */
  document: Record<string, unknown>;
  /** Who wrote it (the admin identity's name). */
  updatedBy: string;
  /** Epoch milliseconds of that write. */
  updatedAt: number;
}

/**
 * How a write treats a resource of the same kind and name. `{ revision: n }`: only when the one
 * stored has revision `n` (0: only when there is none): a compare-and-set, so a writer that read a
 * resource never overwrites a change made since (the rollout controller and an operator's
 * `autoupdate agents rollback` both write the rollout's state).
 */
export type PutMode = 'create' | 'replace' | 'update' | { revision: number };

/** What is written: the store assigns the revision. */
export type ResourceWrite = Omit<StoredResource, 'revision'>;

export interface ResourceStore {
  /** The resource, or undefined when the store has none of that kind and name. */
  getResource(kind: string, name: string): Promise<StoredResource | undefined>;
  /** Every resource of `kind`, sorted by name. */
  listResources(kind: string): Promise<StoredResource[]>;
  /**
   * Writes the resource with the next revision. `create`: only when none of that kind and name
   * exists (atomically: of two racing creates one wins); resolves undefined when one does.
   * `replace`: whether or not one exists. `update`: only when one exists (resolves undefined when
   * none does: a write racing a removal never brings the removed one back).
   */
  putResource(write: ResourceWrite, mode: PutMode): Promise<StoredResource | undefined>;
  /** Removes it; resolves the removed version, or undefined when there was none. */
  deleteResource(kind: string, name: string): Promise<StoredResource | undefined>;
  /**
   * Takes or keeps the lease `name` for `holder` during `ttlMs`: true when `holder` holds it now
   * (it was free, expired, or already `holder`'s, whose time is then renewed). One holder at a
   * time, whatever the clocks of the proxies say: the store's own expiry decides.
   */
  holdLease(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up when `holder` holds it (a clean stop: the next proxy need not wait for the expiry). */
  releaseLease(name: string, holder: string): Promise<void>;
}

/** True for a store that holds resources (both stores of this package do; a test double may not). */
export function isResourceStore(store: object): store is ResourceStore {
  const s = store as Partial<ResourceStore>;
  return (
    typeof s.getResource === 'function' &&
    typeof s.listResources === 'function' &&
    typeof s.putResource === 'function' &&
    typeof s.deleteResource === 'function' &&
    typeof s.holdLease === 'function' &&
    typeof s.releaseLease === 'function'
  );
}

/** A stored resource read back from its JSON (Redis), or undefined when it is not one this version writes. Pure. */
export function parseStoredResource(kind: string, name: string, revision: unknown, text: unknown): StoredResource | undefined {
  if (typeof text !== 'string') return undefined;
  const rev = Number(revision);
  if (!Number.isSafeInteger(rev) || rev < 1) return undefined;
  try {
    const v = JSON.parse(text) as { document?: unknown; updatedBy?: unknown; updatedAt?: unknown };
    if (typeof v.document !== 'object' || v.document === null || Array.isArray(v.document)) return undefined;
    if (typeof v.updatedBy !== 'string' || !Number.isFinite(v.updatedAt)) return undefined;
    return {
      kind,
      name,
      revision: rev,
      document: v.document as Record<string, unknown>,
      updatedBy: v.updatedBy,
      updatedAt: v.updatedAt as number,
    };
  } catch {
    return undefined;
  }
}
