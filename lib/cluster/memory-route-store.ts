import type { GateError } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import type { PutMode, ResourceStore, ResourceWrite, StoredResource } from './resource-store.js';
import type { InventoryRecord, ProxyPresence, RouteStore, TunnelHolding } from './route-store.js';

interface Expiring<T> {
  value: T;
  expiresAt: number;
}

/**
 * The route store of a proxy that runs alone (the default): maps with expiry times, read lazily.
 * Several `GateProxy` instances in one process may share one, which is how in-process tests build
 * a cluster without Redis.
 */
export class MemoryRouteStore implements RouteStore, ResourceStore, Closable {
  private readonly lifecycle = new Lifecycle();
  private readonly presence = new Map<string, Expiring<ProxyPresence>>();
  /** agent → proxy id → holding. */
  private readonly tunnels = new Map<string, Map<string, Expiring<TunnelHolding>>>();
  /** `<server id>:<proxy id>` → inventory record. */
  private readonly records = new Map<string, Expiring<InventoryRecord>>();
  /** kind → name → resource (no expiry: resources stay until removed). */
  private readonly resources = new Map<string, Map<string, StoredResource>>();
  private revision = 0;
  private readonly leases = new Map<string, { holder: string; expiresAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  async announce(presence: ProxyPresence, ttlMs: number): Promise<void> {
    this.presence.set(presence.id, { value: { ...presence }, expiresAt: this.now() + ttlMs });
  }

  async withdraw(proxyId: string): Promise<void> {
    this.presence.delete(proxyId);
  }

  async proxies(): Promise<ProxyPresence[]> {
    return [...this.livePresence().values()].map((p) => ({ ...p }));
  }

  async holdTunnel(holding: TunnelHolding, ttlMs: number): Promise<void> {
    let byProxy = this.tunnels.get(holding.agent);
    if (!byProxy) this.tunnels.set(holding.agent, (byProxy = new Map()));
    const held = byProxy.get(holding.proxyId);
    // An older generation never overwrites a newer one (a refresh racing a reconnect).
    if (held && held.expiresAt > this.now() && held.value.generation > holding.generation) return;
    byProxy.set(holding.proxyId, { value: { ...holding }, expiresAt: this.now() + ttlMs });
  }

  async dropTunnel(holding: TunnelHolding): Promise<boolean> {
    const byProxy = this.tunnels.get(holding.agent);
    const held = byProxy?.get(holding.proxyId);
    if (!byProxy || !held || held.value.generation !== holding.generation) return false;
    byProxy.delete(holding.proxyId);
    if (byProxy.size === 0) this.tunnels.delete(holding.agent);
    return true;
  }

  async holders(agent: string): Promise<TunnelHolding[]> {
    const byProxy = this.tunnels.get(agent);
    if (!byProxy) return [];
    const live = this.livePresence();
    const now = this.now();
    const found: TunnelHolding[] = [];
    for (const [proxyId, held] of byProxy) {
      if (held.expiresAt <= now) byProxy.delete(proxyId);
      else if (live.has(proxyId)) found.push({ ...held.value });
    }
    return found;
  }

  async putAgentRecord(record: InventoryRecord, ttlMs: number): Promise<void> {
    const key = `${record.serverId}:${record.proxyId}`;
    const held = this.records.get(key);
    if (held && held.expiresAt > this.now() && held.value.generation > record.generation) return;
    this.records.set(key, { value: copyRecord(record), expiresAt: this.now() + ttlMs });
  }

  async dropAgentRecord(key: { serverId: string; proxyId: string; generation: number }): Promise<boolean> {
    const id = `${key.serverId}:${key.proxyId}`;
    if (this.records.get(id)?.value.generation !== key.generation) return false;
    return this.records.delete(id);
  }

  async agentRecords(): Promise<InventoryRecord[]> {
    const live = this.livePresence();
    const now = this.now();
    const found: InventoryRecord[] = [];
    for (const [key, held] of this.records) {
      if (held.expiresAt <= now) this.records.delete(key);
      else if (live.has(held.value.proxyId)) found.push(copyRecord(held.value));
    }
    return found;
  }

  async getResource(kind: string, name: string): Promise<StoredResource | undefined> {
    const found = this.resources.get(kind)?.get(name);
    return found && copyResource(found);
  }

  async listResources(kind: string): Promise<StoredResource[]> {
    return [...(this.resources.get(kind)?.values() ?? [])].map(copyResource).sort((a, b) => a.name.localeCompare(b.name));
  }

  async putResource(write: ResourceWrite, mode: PutMode): Promise<StoredResource | undefined> {
    let byName = this.resources.get(write.kind);
    if (!byName) this.resources.set(write.kind, (byName = new Map()));
    if (mode === 'create' && byName.has(write.name)) return undefined;
    if (mode === 'update' && !byName.has(write.name)) return undefined;
    if (typeof mode === 'object' && (byName.get(write.name)?.revision ?? 0) !== mode.revision) return undefined;
    const stored = copyResource({ ...write, revision: ++this.revision });
    byName.set(write.name, stored);
    return copyResource(stored);
  }

  async deleteResource(kind: string, name: string): Promise<StoredResource | undefined> {
    const byName = this.resources.get(kind);
    const found = byName?.get(name);
    if (!byName || !found) return undefined;
    byName.delete(name);
    this.revision++;
    return found;
  }

  async holdLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const held = this.leases.get(name);
    if (held && held.holder !== holder && held.expiresAt > this.now()) return false;
    this.leases.set(name, { holder, expiresAt: this.now() + ttlMs });
    return true;
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    if (this.leases.get(name)?.holder === holder) this.leases.delete(name);
  }

  /** open, or closed: nothing is held but memory, so close resolves at once. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  close(_options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {});
  }

  destroy(_err?: GateError): void {
    this.lifecycle.destroy();
  }

  private livePresence(): Map<string, ProxyPresence> {
    const now = this.now();
    const live = new Map<string, ProxyPresence>();
    for (const [id, entry] of this.presence) {
      if (entry.expiresAt <= now) this.presence.delete(id);
      else live.set(id, entry.value);
    }
    return live;
  }
}

function copyRecord(record: InventoryRecord): InventoryRecord {
  return { ...record, services: record.services.map((s) => ({ ...s })) };
}

/** A deep copy (documents are plain JSON): a caller's edit never reaches the store. */
function copyResource(resource: StoredResource): StoredResource {
  return { ...resource, document: structuredClone(resource.document) };
}
