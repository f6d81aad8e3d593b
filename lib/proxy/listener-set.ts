import { ErrorCodes, GateError, isGateError } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState, within, type Closable } from '../lifecycle.js';
import type { Logger } from '../log.js';
import type { GateConfig } from '../config/types.js';
import { formatAddress, type HostPort } from '../config/address.js';
import { ConnectionBudget, processBudget } from '../mux/connection-budget.js';
import { describeCap } from '../mux/descriptor-limit.js';
import { Multiplexer } from '../mux/multiplexer.js';
import { RouteTable } from '../mux/route-table.js';
import type { MultiplexerSettings, Route } from '../mux/types.js';
import type { StatsSnapshot } from '../mux/stats.js';
import type { ListenerState } from '../cluster/readiness.js';
import { planListeners, type ListenerPlan, type ListenerSpec } from './listener-plan.js';

interface RunningListener {
  spec: ListenerSpec;
  mux: Multiplexer;
  port: number;
}

/**
 * A prepared change of the listener set: every new listener is bound already. `commit` swaps it in
 * and cannot fail; `abort` closes what was bound and leaves the running set as it was.
 */
export interface ListenerChange {
  commit(): void;
  abort(): Promise<void>;
}

export interface ListenerSetOptions {
  logger: Logger;
  /** Per-listener multiplexer logs go to this logger's children (`{listener}`); none: silent. */
  muxLogger?: Logger | undefined;
  /** Told the final counts of each listener once it is closed, so totals survive a reload. */
  onRetired?: (snapshot: StatsSnapshot) => void;
}

/** How long a listener dropped by a reload lets its connections finish. */
const RETIRE_GRACE_MS = 30_000;

/**
 * Whether a running listener can serve `spec` across a reload: the same host and silence
 * settings, and the port it asks for is the one bound (or both ask for any port, 0). The name may
 * change: the shared port is `multiplex` in one mode and `web` in the other, and a mode switch
 * keeps its bound socket instead of binding the same address twice.
 */
function serves(running: RunningListener, spec: ListenerSpec): boolean {
  const was = running.spec;
  if (was.host !== spec.host || was.silentRoute !== spec.silentRoute || was.silentAfterMs !== spec.silentAfterMs) return false;
  return spec.port === 0 ? was.port === 0 : running.port === spec.port;
}

/**
 * The multiplexer settings a configuration asks for a listener. The same for every listener but
 * the peering one, which never expects a PROXY header: `proxy_protocol` describes the load
 * balancer in front of the public ports, while proxies dial each other's peer port directly.
 */
function muxSettings(config: GateConfig, budget: ConnectionBudget, spec: ListenerSpec): MultiplexerSettings {
  const p = config.proxy;
  const proxyProtocol = p.proxyProtocol === 'on' && spec.name !== 'peer';
  return {
    detectTimeoutMs: p.detectTimeoutMs,
    idleTimeoutMs: p.idleTimeoutMs,
    maxConnectionsPerSource: p.maxConnectionsPerSource,
    proxyProtocol: proxyProtocol ? { mode: 'on', trusted: p.proxyProtocolTrustedNetworks } : { mode: 'off' },
    budget,
  };
}

/**
 * Runs `build`, turning a refused argument (GATE_ERR_INVALID_ARGUMENT from RouteTable or
 * Multiplexer) into GATE_ERR_CONFIG_INVALID naming the listener's key: here the routes come from
 * the configuration, so the configuration is what the operator must fix.
 */
function asConfigError<T>(spec: ListenerSpec, build: () => T): T {
  try {
    return build();
  } catch (err) {
    throw configErrorOf(spec, err);
  }
}

function configErrorOf(spec: ListenerSpec, err: unknown): unknown {
  return isGateError(err, ErrorCodes.INVALID_ARGUMENT)
    ? new GateError(ErrorCodes.CONFIG_INVALID, `${spec.configKey}: ${err.message}`, { cause: err })
    : err;
}

/** The connection cap: `max_connections` when set, else what the open-file limit carries. */
function budgetSettings(
  config: GateConfig,
  logger: Logger,
): { options: { cap: number; highWater: number; sourceShare: number }; from: string } {
  const p = config.proxy;
  const descriptors = processBudget().from; // read once per process
  if (p.maxConnections > descriptors.cap) {
    logger.warn(
      { maxConnections: p.maxConnections, descriptorCap: descriptors.cap },
      `max_connections ${p.maxConnections} is above what the open-file limit carries (${descriptors.cap}: ${describeCap(descriptors)}); connections past it may fail to dial their upstream: raise LimitNOFILE`,
    );
  }
  const cap = p.maxConnections > 0 ? p.maxConnections : descriptors.cap;
  const from = p.maxConnections > 0 ? 'proxy_service.max_connections' : describeCap(descriptors);
  return { options: { cap, highWater: p.highWater, sourceShare: p.sourceShare }, from };
}

/**
 * The proxy's listeners (the shared TLS-routing port, or the legacy separate ports, and the peer
 * port) and the one connection budget they share: descriptors are per process. A new
 * configuration is applied all or nothing: `prepare` binds every new listener first, and only
 * `commit` swaps; listeners that stay keep their bound socket and take the new routes and settings
 * for new connections, while established connections keep what they started with.
 */
export class ListenerSet implements Closable {
  private running: RunningListener[] = [];
  private readonly lifecycle = new Lifecycle();
  /** Listeners being closed (dropped by a reload, or by close()): still counted until they are gone. */
  private readonly retiring = new Set<Multiplexer>();
  private budget: ConnectionBudget | undefined;
  private capFrom = '';

  constructor(private readonly options: ListenerSetOptions) {}

  /** Open connections allowed over every listener, and how that number came about. */
  get connectionCap(): { cap: number; from: string } {
    return { cap: this.budget?.cap ?? 0, from: this.capFrom };
  }

  /** The listeners with the ports they are bound to, in the plan's order (the shared port first). */
  plan(mode: GateConfig['listenerMode']): ListenerPlan {
    return { mode, listeners: this.running.map((l) => ({ ...l.spec, port: l.port })) };
  }

  /** The configured host and bound port of the listener named `name` (`peer`, `multiplex`, ...), if there is one. */
  boundAddress(name: string): HostPort | undefined {
    const found = this.running.find((l) => l.spec.name === name);
    return found && { host: found.spec.host, port: found.port };
  }

  /** The multiplexer of the listener named `name`, while it runs (where upgraded streams go). */
  multiplexer(name: string): Multiplexer | undefined {
    return this.running.find((l) => l.spec.name === name)?.mux;
  }

  /** Counters per running listener, by name. */
  stats(): Record<string, StatsSnapshot> {
    return Object.fromEntries(this.running.map((l) => [l.spec.name, l.mux.stats()]));
  }

  /** Counters of every listener still open, those being retired included (for the metrics). */
  allStats(): StatsSnapshot[] {
    return [...this.running.map((l) => l.mux.stats()), ...[...this.retiring].map((mux) => mux.stats())];
  }

  /** What /readyz reports of the listeners. */
  readiness(): ListenerState[] {
    return this.running.map((l) => ({
      name: l.spec.name,
      address: formatAddress({ host: l.spec.host, port: l.port }),
      listening: l.mux.listening,
    }));
  }

  /**
   * Binds what `config` adds and checks the routes of what it keeps; nothing running changes until
   * the returned change is committed. Throws (having closed what it bound) when a listener cannot
   * be bound or a route table is invalid.
   */
  async prepare(config: GateConfig, routesOf: (spec: ListenerSpec) => Route[]): Promise<ListenerChange> {
    const next = planListeners(config).listeners.map((spec) => ({ spec, routes: routesOf(spec) }));
    const settings = budgetSettings(config, this.options.logger);
    const budget = this.budget ?? new ConnectionBudget(settings.options);
    const unclaimed = new Set(this.running);
    const kept: Array<{ existing: RunningListener; spec: ListenerSpec; routes: Route[] }> = [];
    const opened: RunningListener[] = [];
    try {
      for (const { spec, routes } of next) {
        const existing = [...unclaimed].find((l) => serves(l, spec));
        if (existing) {
          asConfigError(spec, () => new RouteTable(routes)); // now rather than half-way through the swap
          unclaimed.delete(existing);
          kept.push({ existing, spec, routes });
          continue;
        }
        opened.push(await this.open(spec, routes, muxSettings(config, budget, spec)));
      }
    } catch (err) {
      await Promise.all(opened.map((l) => l.mux.close({ graceMs: 0 })));
      throw err;
    }
    return {
      abort: async () => {
        await Promise.all(opened.map((l) => l.mux.close({ graceMs: 0 })));
      },
      commit: () => {
        budget.setOptions(settings.options);
        if (this.budget === undefined || this.capFrom !== settings.from || this.budget.cap !== settings.options.cap) {
          // The cap always exists: say at start, and when it changes, what it is and why.
          this.options.logger.info(
            { maxConnections: budget.cap, capFrom: settings.from, highWater: budget.highWater, sourceShare: budget.sourceShare },
            `connection cap ${budget.cap} (${settings.from})`,
          );
        }
        this.budget = budget;
        this.capFrom = settings.from;
        for (const { existing, spec, routes } of kept) {
          existing.mux.setRoutes(routes);
          existing.mux.setOptions(muxSettings(config, budget, spec));
          existing.spec = spec;
        }
        // Listeners the new configuration no longer has: stop accepting, let their connections finish.
        for (const gone of unclaimed) void this.retire(gone.mux, { graceMs: RETIRE_GRACE_MS });
        const order = new Map(next.map(({ spec }, i) => [spec, i]));
        this.running = [...kept.map((k) => k.existing), ...opened].sort((a, b) => (order.get(a.spec) ?? 0) - (order.get(b.spec) ?? 0));
      },
    };
  }

  /** open, closing (connections finishing), closed (every listener's multiplexer closed). */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /** Stops accepting everywhere; open connections get `graceMs` to finish. A second call returns the same promise. */
  close(options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      const running = this.running;
      this.running = [];
      // Listeners a reload retired are finishing on their own grace: they get this one at most.
      const retired = [...this.retiring].map(async (mux) => {
        if (options.graceMs !== undefined) {
          await within(mux.close(), options.graceMs);
          mux.destroy();
        }
        await mux.close();
      });
      await Promise.all([...running.map((l) => this.retire(l.mux, options)), ...retired]);
    });
  }

  /** Stops accepting everywhere and fails every open connection now (retiring listeners included). */
  destroy(err?: GateError): void {
    if (!this.lifecycle.destroy()) return;
    const muxes = [...this.running.map((l) => l.mux), ...this.retiring];
    this.running = [];
    for (const mux of muxes) mux.destroy(err);
  }

  /** Closes a listener's multiplexer, counting it until it is gone and reporting its totals after. */
  private async retire(mux: Multiplexer, options: { graceMs?: number }): Promise<void> {
    this.retiring.add(mux);
    try {
      await mux.close(options);
    } finally {
      this.retiring.delete(mux);
      this.options.onRetired?.(mux.stats());
    }
  }

  /** A new listener's multiplexer, bound; GATE_ERR_LISTEN_FAILED when its address cannot be. */
  private async open(spec: ListenerSpec, routes: Route[], settings: MultiplexerSettings): Promise<RunningListener> {
    const mux = asConfigError(
      spec,
      () =>
        new Multiplexer({
          routes,
          ...settings,
          ...(this.options.muxLogger ? { logger: this.options.muxLogger.child({ listener: spec.name }) } : {}),
        }),
    );
    try {
      const address = await mux.listen({
        host: spec.host,
        port: spec.port,
        ...(spec.silentRoute !== undefined ? { silentRoute: spec.silentRoute } : {}),
        ...(spec.silentAfterMs !== undefined ? { silentAfterMs: spec.silentAfterMs } : {}),
      });
      return { spec, mux, port: address.port };
    } catch (err) {
      await mux.close({ graceMs: 0 });
      const refused = configErrorOf(spec, err);
      if (isGateError(refused)) throw refused;
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new GateError(ErrorCodes.LISTEN_FAILED, `${spec.configKey}: cannot listen on ${spec.host}:${spec.port} (${code})`, {
        cause: err,
      });
    }
  }
}
