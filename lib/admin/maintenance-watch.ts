/**
 * The maintenance window a proxy serves (`/v1/webapi/automaticupgrades/schedule`, which
 * `gate-upgrade export-schedule` writes): the `cluster_maintenance_config` in the cluster store,
 * else the `proxy_service.cluster_maintenance_config` of this proxy's gate.yaml (the initial value,
 * so files written before the resource existed keep working). The store is read every
 * `intervalMs` (one HMGET): every proxy serves a change within that, whether or not any message
 * reached it, and the public endpoint never makes a store round trip of its own. A log line says
 * which window is in force whenever that changes.
 */
import { ErrorCodes } from '../errors.js';
import { type Closable, type CloseOptions, Lifecycle, type LifecycleState } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import type { ResourceStore } from '../cluster/resource-store.js';
import { formatMaintenanceConfig, type MaintenanceConfig } from '../config/maintenance-schedule.js';
import { maintenanceOf } from './manifest.js';
import { MAINTENANCE_KIND, MAINTENANCE_NAME } from './resource-kinds.js';

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
  private readonly lifecycle = new Lifecycle();
  private timer: NodeJS.Timeout | undefined;
  /** What the store held at the last successful read (undefined: none). */
  private stored: { config: MaintenanceConfig; revision: number } | undefined;
  private storeDown = false;
  private lastSaid = '';
  private polling: Promise<void> | undefined;

  constructor(private readonly options: MaintenanceWatchOptions) {
    this.log = componentLogger(options.logger, 'maintenance');
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
  async start(): Promise<void> {
    await this.poll();
    const tick = (): void => {
      if (this.lifecycle.ending) return;
      this.timer = setTimeout(() => void this.poll().finally(tick), this.options.intervalMs ?? DEFAULT_WATCH_INTERVAL_MS);
      this.timer.unref();
    };
    tick();
  }

  /** One read of the store (one at a time). */
  poll(): Promise<void> {
    this.polling ??= this.read().finally(() => (this.polling = undefined));
    return this.polling;
  }

  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  close(_options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      clearTimeout(this.timer);
      await this.polling;
    });
  }

  destroy(): void {
    if (this.lifecycle.destroy()) clearTimeout(this.timer);
  }

  private async read(): Promise<void> {
    const store = this.options.store();
    if (store) {
      try {
        const found = await store.getResource(MAINTENANCE_KIND, MAINTENANCE_NAME);
        const config = found && maintenanceOf(found.document);
        this.stored = found && config ? { config, revision: found.revision } : undefined;
        if (this.storeDown) this.log.info('cluster store readable again: maintenance window read from it');
        this.storeDown = false;
      } catch (err) {
        // Keep serving what was read last: a store outage does not take the window away.
        if (!this.storeDown)
          this.log.warn(
            { code: ErrorCodes.STORE_UNAVAILABLE, err },
            'cannot read the maintenance window from the cluster store; serving the one read last',
          );
        this.storeDown = true;
      }
    }
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
