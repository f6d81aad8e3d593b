/**
 * The maintenance window a proxy serves (`/v1/webapi/automaticupgrades/schedule`, which
 * `gate-upgrade export-schedule` writes): the `cluster_maintenance_config` in the cluster store,
 * else the `proxy_service.cluster_maintenance_config` of this proxy's gate.yaml (the initial value,
 * so files written before the resource existed keep working). The store is read every
 * `intervalMs` (one HMGET) by a StorePoller (store-poller.ts): every proxy serves a change within
 * that, and the public endpoint never makes a store round trip of its own. A log line says which
 * window is in force whenever that changes.
 */
import type { Closable, CloseOptions, LifecycleState } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import type { ResourceStore } from '../cluster/resource-store.js';
import { formatMaintenanceConfig, type MaintenanceConfig } from '../config/maintenance-schedule.js';
import { maintenanceOf } from './manifest.js';
import { MAINTENANCE_KIND, MAINTENANCE_NAME } from './resource-kinds.js';
import { StorePoller } from './store-poller.js';

export const DEFAULT_WATCH_INTERVAL_MS = 1000;

export interface MaintenanceWatchOptions {
  store: () => ResourceStore | undefined;
  /** gate.yaml's value, read at each poll (it follows reloads). */
  fallback: () => MaintenanceConfig | undefined;
  intervalMs?: number;
  logger?: Logger | undefined;
}

/** Where the window in force comes from. */
export type WindowSource = { from: 'store'; revision: number } | { from: 'config' } | { from: 'none' };

export class MaintenanceWatch implements Closable {
  private readonly log: Logger;
  private readonly poller: StorePoller;
  /** What the store held at the last successful read (undefined: none). */
  private stored: { config: MaintenanceConfig; revision: number } | undefined;
  private lastSaid = '';

  constructor(private readonly options: MaintenanceWatchOptions) {
    this.log = componentLogger(options.logger, 'maintenance');
    this.poller = new StorePoller({
      intervalMs: options.intervalMs ?? DEFAULT_WATCH_INTERVAL_MS,
      poll: () => this.read(),
      logger: this.log,
      unreadable: 'cannot read the maintenance window from the cluster store; serving the one read last',
      readableAgain: 'cluster store readable again: maintenance window read from it',
    });
  }

  /** The window served now: the stored one, else gate.yaml's, else none. */
  current(): MaintenanceConfig | undefined {
    return this.stored?.config ?? this.options.fallback();
  }

  get source(): WindowSource {
    if (this.stored) return { from: 'store', revision: this.stored.revision };
    return this.options.fallback() ? { from: 'config' } : { from: 'none' };
  }

  /** Reads the store now and then every interval; resolves after the first read. */
  start(): Promise<void> {
    return this.poller.start();
  }

  /** One read of the store (one at a time). */
  poll(): Promise<void> {
    return this.poller.poll();
  }

  get state(): LifecycleState {
    return this.poller.state;
  }

  close(_options: CloseOptions = {}): Promise<void> {
    return this.poller.close();
  }

  destroy(): void {
    this.poller.destroy();
  }

  private async read(): Promise<void> {
    const store = this.options.store();
    const read =
      store &&
      (await this.poller.readStore(async () => {
        const found = await store.getResource(MAINTENANCE_KIND, MAINTENANCE_NAME);
        const config = found && maintenanceOf(found.document);
        return found && config ? { config, revision: found.revision } : undefined;
      }));
    // Unreadable: keep serving what was read last, a store outage does not take the window away.
    if (read) this.stored = read.value;
    this.say();
  }

  private say(): void {
    const config = this.current();
    const source = this.source;
    const window = config ? formatMaintenanceConfig(config).split('\n').slice(3, 5).join(',').replace(/\s+/g, ' ').trim() : '';
    const line =
      source.from === 'store'
        ? `maintenance window in force: the cluster's cluster_maintenance_config (revision ${source.revision}): ${window}`
        : source.from === 'config'
          ? `maintenance window in force: proxy_service.cluster_maintenance_config of this proxy's configuration (the cluster store has none): ${window}`
          : "no maintenance window: neither the cluster store nor this proxy's configuration has a cluster_maintenance_config";
    if (line === this.lastSaid) return;
    this.lastSaid = line;
    this.log.info({ source: source.from, ...(source.from === 'store' ? { revision: source.revision } : {}) }, line);
  }
}
