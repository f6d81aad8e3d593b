import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type MetricType } from 'prom-client';
import type { ErrorCode } from '../errors.js';
import { DETECT_MS_BOUNDS, type StatsSnapshot } from '../mux/stats.js';
import { addSnapshot, emptySnapshot } from './stats-sum.js';

/** What the metrics read at each scrape: nothing is pushed per connection (the hot path stays as it is). */
export interface MetricSources {
  /** The statistics of every multiplexer that may still count (running listeners, and ones still draining after a reload). */
  listeners(): StatsSnapshot[];
  /** Agents' reverse tunnels on this proxy. */
  tunnels(): { agents: number; streamsOpened: number; streamsReset: number; streamsBusy?: number };
  /** This proxy's agents by what they said (version, upgrader), and the agents it refused by code. */
  fleet?(): FleetCounts;
  /** The connection upgrade's counts (TLS routing through load balancers that end TLS): `ConnectionUpgrade.counts`. */
  upgrades?(): UpgradeCounts;
}

/** What the connection upgrade has done (the shape of `ConnectionUpgrade.counts`; every figure only grows). */
export interface UpgradeCounts {
  upgraded: number;
  refused: number;
  /** Refusals by the HTTP status answered. */
  refusedByStatus: Record<string, number>;
  bytesIn: number;
  bytesOut: number;
  pingsSent: number;
}

/** Agents counted by label value (see `fleetCounts` in inventory.ts). */
export interface FleetCounts {
  byVersion: Record<string, number>;
  byUpgrader: Record<string, number>;
  refused: Record<string, number>;
}

const NO_FLEET: FleetCounts = { byVersion: {}, byUpgrader: {}, refused: {} };

const NO_UPGRADES: UpgradeCounts = { upgraded: 0, refused: 0, refusedByStatus: {}, bytesIn: 0, bytesOut: 0, pingsSent: 0 };

/** One scrape's figures: the listeners' sum, the tunnels, the agents and the connection upgrade. */
type Scrape = StatsSnapshot & { tunnels: ReturnType<MetricSources['tunnels']>; fleet: FleetCounts; upgrades: UpgradeCounts };

/** How a dial to another proxy ended (peering). */
export type PeerDialOutcome = 'ok' | 'failed';

/** ClientHello size buckets (bytes): the multiplexer's power-of-two buckets, up to the default hello cap. */
const HELLO_BYTES_BOUNDS = [256, 512, 1024, 2048, 4096, 8192, 16_384];

const NO_SOURCES: MetricSources = {
  listeners: () => [],
  tunnels: () => ({ agents: 0, streamsOpened: 0, streamsReset: 0 }),
};

/**
 * Node's process metrics (CPU, memory, event-loop delay, GC, descriptors), registered once per
 * process in a registry of their own: they describe the process, not one proxy, and prom-client's
 * GC observer can never be detached, so one per GateProxy would pile up in a process that starts
 * several. Made at the first scrape, so a proxy without `diag_addr` never starts them.
 */
let processRegistry: Registry | undefined;

function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/**
 * The event loop's delay since the first GateMetrics was made (the proxy's start): one native
 * timer per process, read at scrape time. Every connection on every listener waits for the loop,
 * so its worst delay is what an anonymous request that does work on the main thread would show.
 * prom-client's nodejs_eventloop_lag_* are reset at each scrape and sampled every 10 ms; this one
 * samples every 5 ms and keeps the maximum since start, so no stall falls between two scrapes.
 * Two more monitors give the worst of the last one to two seconds (`max_recent`): a stall at start
 * (key generation) does not hide one that came later, and a probe polling it sees each stall.
 * They are reset in turn, a window apart, because a monitor drops the first delay after a reset
 * (it has no previous tick to measure from): a stall that began just after one was reset is
 * still seen whole by the other.
 */
interface LoopDelay {
  sinceStart: IntervalHistogram;
  recent: [IntervalHistogram, IntervalHistogram];
}
let loopDelay: LoopDelay | undefined;
const LOOP_DELAY_RESOLUTION_MS = 5;
const LOOP_DELAY_WINDOW_MS = 1000;

function eventLoopDelay(): LoopDelay {
  if (!loopDelay) {
    const monitor = (): IntervalHistogram => {
      const histogram = monitorEventLoopDelay({ resolution: LOOP_DELAY_RESOLUTION_MS });
      histogram.enable();
      return histogram;
    };
    const delay: LoopDelay = { sinceStart: monitor(), recent: [monitor(), monitor()] };
    let turn = 0;
    setInterval(() => {
      delay.recent[turn]!.reset();
      turn = 1 - turn;
    }, LOOP_DELAY_WINDOW_MS).unref();
    loopDelay = delay;
  }
  return loopDelay;
}

/** The worst delay a monitor recorded, in ns (0 before its first sample). */
function worstOf(histogram: IntervalHistogram): number {
  return histogram.count === 0 ? 0 : histogram.max;
}

/**
 * A histogram whose buckets are read from a snapshot at scrape time instead of observed one value
 * at a time: the multiplexer keeps its own counts (lib/mux/stats.ts) and this only exports them.
 */
class SnapshotHistogram extends Histogram {
  constructor(
    name: string,
    help: string,
    registry: Registry,
    private readonly bounds: readonly number[],
    /** Upper bound label scale: the snapshot's unit to the exported one (ms → s). */
    private readonly scale: number,
    private readonly read: () => { count: number; sum: number; histogram: Record<string, number> },
  ) {
    super({ name, help, registers: [registry], buckets: bounds.map((b) => b * scale) });
  }

  /**
   * What the registry renders (prom-client 15: `Registry.metrics()` calls `getForPromString()`,
   * and `get()` is built on it). Not in prom-client's typings, so test/cluster/diag-server.test.ts
   * checks the buckets it yields: a prom-client that stopped calling it would fail there.
   */
  async getForPromString(): ReturnType<Histogram['get']> {
    const { name, help } = this as unknown as { name: string; help: string };
    const { count, sum, histogram } = this.read();
    const values: Awaited<ReturnType<Histogram['get']>>['values'] = [];
    let cumulative = 0;
    for (const bound of this.bounds) {
      cumulative += histogram[String(bound)] ?? 0;
      values.push({ metricName: `${name}_bucket`, labels: { le: bound * this.scale }, value: cumulative });
    }
    values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf' }, value: count });
    values.push({ metricName: `${name}_sum`, labels: {}, value: sum * this.scale });
    values.push({ metricName: `${name}_count`, labels: {}, value: count });
    return { name, help, type: 'histogram' as unknown as MetricType, values, aggregator: 'sum', collect: () => {} };
  }
}

/**
 * The proxy's Prometheus metrics (served on `diag_addr` at /metrics), in a registry of its own,
 * never prom-client's global one. The multiplexers' and tunnels' figures are read from their
 * counters at each scrape (`MetricSources`); peering and the store report through the methods.
 */
export class GateMetrics {
  readonly registry = new Registry();
  private sources: MetricSources = NO_SOURCES;
  /** Counts of listeners closed by a reload: added in, so no counter ever goes down. */
  private readonly retired: StatsSnapshot = emptySnapshot();
  /** What the sources said, read once per scrape and by every collector of that scrape. */
  private current: Scrape = { ...emptySnapshot(), tunnels: NO_SOURCES.tunnels(), fleet: NO_FLEET, upgrades: NO_UPGRADES };
  private readonly peerDials: Counter<'outcome'>;
  private readonly peerDialFailures: Counter<'code'>;
  private readonly storeErrors: Counter<'operation'>;
  private readonly rolloutHaltedGroups: Gauge<'group'>;
  private readonly rolloutHalts: Counter<'group'>;
  private readonly channelMismatches: Gauge;

  constructor() {
    const registers = [this.registry];
    const now = (): Scrape => this.current;
    /**
     * A counter or gauge whose values are set at each scrape from what the sources said: `fill` calls
     * `add(labels, value)` once per series (after a reset, so a counter's add is its whole value).
     */
    const collected = <L extends string>(
      kind: 'counter' | 'gauge',
      name: string,
      help: string,
      labelNames: L[],
      fill: (add: (labels: Partial<Record<L, string>>, value: number) => void, s: Scrape) => void,
    ): void => {
      const collect = function (this: Counter<L> | Gauge<L>): void {
        this.reset();
        fill((labels, value) => this.inc(labels, value), now());
      };
      if (kind === 'counter') new Counter<L>({ name, help, labelNames, registers, collect });
      else new Gauge<L>({ name, help, labelNames, registers, collect });
    };
    const counter = <L extends string>(name: string, help: string, labelNames: L[], fill: Parameters<typeof collected<L>>[4]): void =>
      collected('counter', name, help, labelNames, fill);
    const gauge = <L extends string>(name: string, help: string, labelNames: L[], fill: Parameters<typeof collected<L>>[4]): void =>
      collected('gauge', name, help, labelNames, fill);

    counter('gate_mux_connections_accepted_total', 'Connections accepted, over every listener.', [], (add, s) => add({}, s.accepted));
    counter(
      'gate_mux_connections_rejected_total',
      'Connections refused at accept (caps, untrusted PROXY source, shutdown).',
      [],
      (add, s) => add({}, s.rejected),
    );
    gauge('gate_mux_connections_open', 'Connections open now (detecting or routed).', [], (add, s) => add({}, s.open));
    counter('gate_mux_route_connections_total', 'Connections routed, by route.', ['route'], (add, s) => {
      for (const [route, r] of Object.entries(s.byRoute)) add({ route }, r.connections);
    });
    gauge('gate_mux_route_connections_open', 'Routed connections open now, by route.', ['route'], (add, s) => {
      for (const [route, r] of Object.entries(s.byRoute)) add({ route }, r.open);
    });
    counter(
      'gate_mux_route_bytes_total',
      'Bytes relayed for closed connections, by route and direction (in: from the client).',
      ['route', 'direction'],
      (add, s) => {
        for (const [route, r] of Object.entries(s.byRoute)) {
          add({ route, direction: 'in' }, r.bytesIn);
          add({ route, direction: 'out' }, r.bytesOut);
        }
      },
    );
    counter(
      'gate_mux_protocol_connections_total',
      'Connections by detected protocol (tls, postgres, ssh, http1, h2, silent).',
      ['protocol'],
      (add, s) => {
        for (const [protocol, n] of Object.entries(s.byProtocol)) add({ protocol }, n);
      },
    );
    counter(
      'gate_mux_connection_failures_total',
      'Connections that ended with an error, by GATE_ERR_* code (refusals at accept included).',
      ['code'],
      (add, s) => {
        for (const [code, n] of Object.entries(s.failures)) add({ code }, n);
      },
    );
    new SnapshotHistogram(
      'gate_mux_detection_seconds',
      'Time from accept to the routing decision.',
      this.registry,
      DETECT_MS_BOUNDS,
      1 / 1000,
      () => now().detectMs,
    );
    new SnapshotHistogram(
      'gate_mux_client_hello_bytes',
      'TLS ClientHello handshake message sizes.',
      this.registry,
      HELLO_BYTES_BOUNDS,
      1,
      () => now().helloBytes,
    );

    const delay = eventLoopDelay();
    gauge(
      'gate_mux_event_loop_delay_seconds',
      'Event-loop delay (perf_hooks, 5 ms resolution), by stat: p50, p99 and max since the proxy started; max_recent, the worst of the last 1 to 2 s.',
      ['stat'],
      (add) => {
        // Node records the whole interval between two samples; the resolution itself is not delay.
        const seconds = (ns: number): number => Math.max(0, ns / 1e9 - LOOP_DELAY_RESOLUTION_MS / 1000);
        const { sinceStart, recent } = delay;
        add({ stat: 'p50' }, sinceStart.count === 0 ? 0 : seconds(sinceStart.percentile(50)));
        add({ stat: 'p99' }, sinceStart.count === 0 ? 0 : seconds(sinceStart.percentile(99)));
        add({ stat: 'max' }, seconds(worstOf(sinceStart)));
        add({ stat: 'max_recent' }, seconds(Math.max(worstOf(recent[0]), worstOf(recent[1]))));
      },
    );
    gauge('gate_mux_tunnel_agents', 'Agents with a reverse tunnel to this proxy now.', [], (add, s) => add({}, s.tunnels.agents));
    counter('gate_mux_tunnel_streams_opened_total', "Streams opened through agents' tunnels.", [], (add, s) =>
      add({}, s.tunnels.streamsOpened),
    );
    counter('gate_mux_tunnel_streams_reset_total', "Streams through agents' tunnels that ended with a reset.", [], (add, s) =>
      add({}, s.tunnels.streamsReset),
    );
    counter(
      'gate_mux_tunnel_streams_busy_total',
      "Clients refused with GATE_ERR_AGENT_BUSY: the agent's tunnel carried the proxy's cap of streams.",
      [],
      (add, s) => add({}, s.tunnels.streamsBusy ?? 0),
    );
    // The agents this proxy holds (an agent tunnelled to two proxies counts at each); the whole
    // cluster's fleet is `gate-mux inventory ls`. Empty version: an agent older than self-descriptions.
    gauge('gate_mux_tunnel_agents_by_version', 'Agents with a tunnel to this proxy, by the version they run.', ['version'], (add, s) => {
      for (const [version, n] of Object.entries(s.fleet.byVersion)) add({ version }, n);
    });
    gauge(
      'gate_mux_tunnel_agents_by_upgrader',
      'Agents with a tunnel to this proxy, by upgrader (none: not enrolled in automatic updates).',
      ['upgrader'],
      (add, s) => {
        for (const [upgrader, n] of Object.entries(s.fleet.byUpgrader)) add({ upgrader }, n);
      },
    );
    counter(
      'gate_mux_tunnel_agents_refused_total',
      'Agent tunnels refused at admission, by GATE_ERR_* code (an incompatible version: GATE_ERR_AGENT_VERSION_INCOMPATIBLE).',
      ['code'],
      (add, s) => {
        for (const [code, n] of Object.entries(s.fleet.refused)) add({ code }, n);
      },
    );
    // The upgraded streams themselves are connections of the multiplexer: routed, failed (with
    // GATE_ERR_CONN_UPGRADE_MESSAGE, ..._PING_TIMEOUT) and counted in bytes by route above.
    counter('gate_mux_conn_upgrades_total', 'Connection upgrades answered 101: streams handed to the multiplexer.', [], (add, s) =>
      add({}, s.upgrades.upgraded),
    );
    counter(
      'gate_mux_conn_upgrades_refused_total',
      'Connection upgrade requests refused, by HTTP status (GATE_ERR_CONN_UPGRADE_REFUSED; 404: another upgrade path).',
      ['status'],
      (add, s) => {
        for (const [status, n] of Object.entries(s.upgrades.refusedByStatus)) add({ status }, n);
      },
    );
    counter(
      'gate_mux_conn_upgrade_bytes_total',
      "Bytes carried in the connection upgrade's binary messages, open streams included (in: from the client).",
      ['direction'],
      (add, s) => {
        add({ direction: 'in' }, s.upgrades.bytesIn);
        add({ direction: 'out' }, s.upgrades.bytesOut);
      },
    );
    counter('gate_mux_conn_upgrade_pings_total', 'WebSocket pings sent on alpn-ping upgrades.', [], (add, s) =>
      add({}, s.upgrades.pingsSent),
    );

    this.peerDials = new Counter({
      name: 'gate_mux_peer_dials_total',
      help: 'Dials to other proxies (peering), by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.peerDialFailures = new Counter({
      name: 'gate_mux_peer_dial_failures_total',
      help: 'Failed dials to other proxies, by GATE_ERR_* code.',
      labelNames: ['code'],
      registers,
    });
    this.storeErrors = new Counter({
      name: 'gate_mux_store_errors_total',
      help: 'Route store operations that failed, by operation.',
      labelNames: ['operation'],
      registers,
    });
    this.channelMismatches = new Gauge({
      name: 'gate_mux_channel_mismatches',
      help: "Live proxies whose automatic-upgrade channel fingerprint differs from this one's.",
      registers,
    });
    this.rolloutHaltedGroups = new Gauge({
      name: 'gate_mux_rollout_halted',
      help: 'Whether the agents rollout is halted (1) in a group, as the cluster store says: every proxy reports it.',
      labelNames: ['group'],
      registers,
    });
    this.rolloutHalts = new Counter({
      name: 'gate_mux_rollout_halts_total',
      help: 'Rollout halts this proxy detected (as the holder of the rollout lease), by group.',
      labelNames: ['group'],
      registers,
    });
    // Present from the first scrape (0), so an alert on them needs no absent() clause.
    this.peerDials.inc({ outcome: 'ok' }, 0);
    this.peerDials.inc({ outcome: 'failed' }, 0);
    this.channelMismatches.set(0);
  }

  /** Where the multiplexer and tunnel figures are read from (GateProxy sets it once). */
  setSources(sources: MetricSources): void {
    this.sources = sources;
  }

  /** Adds the final counts of a listener that a reload closed, so its totals stay in the counters. */
  retire(snapshot: StatsSnapshot): void {
    addSnapshot(this.retired, snapshot, false);
  }

  /** One dial to another proxy; a failure names its GATE_ERR_* code. */
  peerDial(outcome: PeerDialOutcome, code?: ErrorCode): void {
    this.peerDials.inc({ outcome });
    if (outcome === 'failed') this.peerDialFailures.inc({ code: code ?? 'unknown' });
  }

  /** One failed route-store operation (`announce`, `holders`, ...). */
  storeError(operation: string): void {
    this.storeErrors.inc({ operation });
  }

  /** The groups halted now (the others are reported 0 once seen). */
  rolloutHalted(groups: ReadonlyMap<string, boolean>): void {
    this.rolloutHaltedGroups.reset();
    for (const [group, halted] of groups) this.rolloutHaltedGroups.set({ group }, halted ? 1 : 0);
  }

  /** One halt detected by this proxy. */
  rolloutHalt(group: string): void {
    this.rolloutHalts.inc({ group });
  }

  /** How many live proxies publish a channel fingerprint other than this proxy's. */
  channelMismatch(n: number): void {
    this.channelMismatches.set(n);
  }

  /** The Prometheus text exposition: this proxy's metrics, then the process's. */
  async metrics(): Promise<string> {
    const sum = emptySnapshot();
    addSnapshot(sum, this.retired);
    for (const s of this.sources.listeners()) addSnapshot(sum, s);
    this.current = {
      ...sum,
      tunnels: this.sources.tunnels(),
      fleet: this.sources.fleet?.() ?? NO_FLEET,
      upgrades: this.sources.upgrades?.() ?? NO_UPGRADES,
    };
    const own = await this.registry.metrics();
    const process = await processMetrics().metrics();
    return `${own}\n${process}`;
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
