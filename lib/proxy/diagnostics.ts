import type { AddressInfo } from 'node:net';
import type { GateError } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import type { Logger } from '../log.js';
import type { HostPort } from '../config/address.js';
import { DiagServer } from '../cluster/diag-server.js';
import { GateMetrics } from '../cluster/metrics.js';
import type { ReadinessSource } from '../cluster/readiness.js';
import { fleetCounts, type InventoryRow } from '../cluster/inventory.js';
import type { UpgradeCounts } from '../conn-upgrade/upgrade-server.js';
import type { TunnelRegistry } from '../tunnel/registry.js';
import type { ListenerSet } from './listener-set.js';

interface RunningDiag {
  server: DiagServer;
  spec: HostPort;
  /** `diag_token_file`'s token: a new listener has its own from the start; a kept one takes the new one at commit. */
  auth: { token: string | undefined };
}

/** A prepared diagnostics listener: `commit` swaps it in (closing the one it replaces), `abort` closes it if new. */
export interface DiagChange {
  commit(): void;
  abort(): Promise<void>;
}

/**
 * The proxy's diagnostics: the Prometheus metrics every part reports into, the readiness sources
 * /readyz asks, and the listener on `diag_addr` that serves them (none while `diag_addr` is unset).
 */
export class ProxyDiagnostics implements Closable {
  /** Prometheus metrics, served on `diag_addr`; peering and the route store report through it too. */
  readonly metrics = new GateMetrics();
  private readonly readiness: ReadinessSource[] = [];
  private running: RunningDiag | undefined;
  private readonly lifecycle = new Lifecycle();

  constructor(
    private readonly logger: Logger | undefined,
    /** The cluster's fleet, for `/v1/inventory`. */
    private readonly inventory?: () => Promise<InventoryRow[]>,
  ) {}

  /** The diagnostics listener's bound address, while `diag_addr` is set. */
  get address(): AddressInfo | undefined {
    return this.running?.server.address;
  }

  /** Where each scrape reads the listeners' counters, the tunnels, the fleet and the connection upgrade's counts from. */
  observe(listeners: ListenerSet, registry: TunnelRegistry, upgrades?: () => UpgradeCounts): void {
    this.metrics.setSources({
      listeners: () => listeners.allStats(),
      tunnels: () => ({
        agents: registry.agents().length,
        streamsOpened: registry.streamStats.opened,
        streamsReset: registry.streamStats.reset,
        streamsBusy: registry.streamStats.busy,
      }),
      fleet: () => fleetCounts(registry.describedAgents(), registry.refusals),
      ...(upgrades ? { upgrades } : {}),
    });
  }

  /** One more thing /readyz must find ready. */
  addReadiness(source: ReadinessSource): void {
    this.readiness.push(source);
  }

  /**
   * The listener `spec` asks for: the running one when its address is unchanged, a new one bound
   * now, or none. Bound before the public listeners, so that at start a prober finds /readyz
   * saying 503 while they are being bound.
   */
  async prepare(spec: HostPort | undefined, token?: string): Promise<DiagChange> {
    const running = this.running;
    let next: RunningDiag | undefined = running;
    if (!spec) next = undefined;
    else if (!running || running.spec.host !== spec.host || running.spec.port !== spec.port) {
      const auth = { token };
      const server = await DiagServer.start({
        host: spec.host,
        port: spec.port,
        metrics: this.metrics,
        readiness: () => this.readiness,
        token: () => auth.token,
        ...(this.inventory ? { inventory: this.inventory } : {}),
        ...(this.logger ? { logger: this.logger } : {}),
      });
      next = { server, spec, auth };
    }
    return {
      abort: async () => {
        if (next && next !== running) await next.server.close();
      },
      commit: () => {
        if (running && running !== next) void running.server.close();
        this.running = next;
        if (next) next.auth.token = token;
      },
    };
  }

  /** open, closing (the listener's requests in flight finishing), closed. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /** Closes the diagnostics listener (its requests in flight get `graceMs`). A second call returns the same promise. */
  close(options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      const running = this.running;
      this.running = undefined;
      await running?.server.close(options);
    });
  }

  /** Closes the diagnostics listener and its connections now. */
  destroy(err?: GateError): void {
    if (!this.lifecycle.destroy()) return;
    this.running?.server.destroy(err);
    this.running = undefined;
  }
}
