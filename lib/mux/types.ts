/** The multiplexer's own options: routes, listeners, limits. Handler types live in handlers/types.ts. */
import type { Logger } from '../log.js';
import type { DetectedProtocol, Handler } from '../handlers/types.js';
import type { ConnectionBudget } from './connection-budget.js';

/** Conditions a route matches on. Every condition given must hold. */
export interface RouteMatch {
  /** Exact SNI names or `*.suffix` wildcards (case-insensitive). */
  sni?: string | string[];
  /** SNI prefixes such as `kube-gate-proxy-alpn.`. */
  sniPrefix?: string | string[];
  /** ALPN protocols that must appear in the client's list (exact). */
  alpn?: string | string[];
  /** ALPN prefixes, e.g. `gate-mysql-` for versioned MySQL ALPN. */
  alpnPrefix?: string | string[];
  /**
   * Detected protocols. Without it, a route with SNI/ALPN conditions means ['tls', 'postgres'];
   * a route needs at least one condition.
   */
  protocol?: DetectedProtocol | DetectedProtocol[];
}

export interface Route {
  name: string;
  match: RouteMatch;
  handler: Handler;
}

export interface ListenOptions {
  host?: string;
  port: number;
  /** Route name for clients that send nothing for `silentAfterMs` (server-speaks-first protocols). */
  silentRoute?: string;
  /** Milliseconds of client silence before `silentRoute` is taken (default 3000). */
  silentAfterMs?: number;
  backlog?: number;
}

export interface MultiplexerOptions {
  routes: Route[];
  logger?: Logger;
  /** One deadline for the whole detection phase, PROXY header included (default 10000 ms). */
  detectTimeoutMs?: number;
  /** Idle timeout for routed connections, 0 for none (default 0). */
  idleTimeoutMs?: number;
  /**
   * Maximum open connections (a budget of this multiplexer's own). Default 0: the process-wide
   * budget, whose cap is what the open-file limit allows (descriptor-limit.ts). At the cap a new
   * connection takes the slot of an undecided one from a heavier source (GATE_ERR_SHED), or is
   * closed at accept without a byte read (GATE_ERR_TOO_MANY_CONNECTIONS).
   */
  maxConnections?: number;
  /**
   * Fraction of the cap from which the fair share applies (default 0.8). Given (or `sourceShare`
   * given), the multiplexer has a budget of its own, capped at `maxConnections` or the
   * descriptor cap.
   */
  highWater?: number;
  /** Under pressure, the fraction of the cap one source address may hold (default 0.1). */
  sourceShare?: number;
  /**
   * Slots shared with other multiplexers (a proxy's listeners share one: descriptors are per
   * process). When given, `maxConnections`, `highWater` and `sourceShare` are the budget's business.
   */
  budget?: ConnectionBudget;
  /** Failure log lines per code before the rest are only counted (default 10). */
  logBurst?: number;
  /** Interval of the per-code summary lines of failures not logged one by one (default 10 000 ms). */
  logIntervalMs?: number;
  /**
   * Maximum open connections from one client address at any load (default 0: none; the fair
   * share above the high-water mark applies regardless); past it new ones are closed with
   * GATE_ERR_TOO_MANY_FROM_SOURCE. Counted in the budget, over the multiplexers sharing it. With PROXY protocol on, the address is the
   * header's source, counted as soon as the header is read (the load balancer's own address is
   * never counted, except for v2 LOCAL / UNKNOWN headers, which name no client).
   */
  maxConnectionsPerSource?: number;
  /** ClientHello handshake cap (default 16384). */
  maxHelloBytes?: number;
  /**
   * Relay `forward` routes on Node's bare libuv TCP handles instead of net.Socket: about half the
   * CPU per connection (BENCHMARKS.md). Default true; ignored (net.Socket) where this Node does
   * not offer the handles. A passthrough client on a tunnel route (`viaTunnel`) stays on its
   * handle too; other handlers (a user's custom handler included) always get a net.Socket.
   */
  fastPath?: boolean;
  /**
   * Dial and relay `forward` routes in the optional native addon (native/relay.cc) once routed:
   * one epoll thread, no JavaScript for the connect or per read, write or close. Needs the fast path. Default: on
   * when GATE_MUX_NATIVE_RELAY=1; when the addon is not built or does not load, the TypeScript
   * relay runs and one warn line says why.
   */
  nativeRelay?: boolean;
  /**
   * In the native relay, move bytes socket → pipe → socket with splice(2) instead of recv/send
   * through a buffer (a pipe per direction only while the destination is behind). Default: per
   * GATE_MUX_NATIVE_SPLICE, else on (about half the CPU per GB of recv/send, BENCHMARKS.md).
   */
  nativeSplice?: boolean;
  /** PROXY protocol: 'off' rejects headers; 'on' requires one from trusted networks (CIDRs). */
  proxyProtocol?: { mode: 'off' } | { mode: 'on'; trusted: string[] };
}

/** What `Multiplexer.setOptions` changes for new connections; established ones keep what they had. */
export type MultiplexerSettings = Pick<
  MultiplexerOptions,
  | 'detectTimeoutMs'
  | 'idleTimeoutMs'
  | 'maxConnections'
  | 'maxConnectionsPerSource'
  | 'maxHelloBytes'
  | 'proxyProtocol'
  | 'highWater'
  | 'sourceShare'
  | 'budget'
>;
