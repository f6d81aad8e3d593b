import { ErrorCodes, GateError } from '../errors.js';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from './backoff.js';
import type { ClusterView } from './cluster-view.js';

/** Tunnels an agent keeps, each to a distinct proxy, when nothing says otherwise. */
export const DEFAULT_CONNECTION_COUNT = 2;

/** What the pool needs to know of one of the agent's tunnels. */
export interface PoolTunnel {
  /** The proxy it landed on, once that proxy said so; undefined before, or from a proxy that sends no view. */
  readonly proxyId: string | undefined;
}

/**
 * How many tunnels an agent wants, and which one is a duplicate. Pure: the
 * agent feeds it the views proxies send and its tunnels, and asks.
 *
 * The agent reaches the proxies only through a load balancer, so it cannot choose where a tunnel
 * lands; it can only learn where it landed (each proxy names itself) and how many proxies there
 * are (each proxy sends the list of live ones). It wants `connectionCount` tunnels, but never more
 * than there are proxies: with fewer proxies than that it holds one per proxy and dials no more
 * until the list grows, instead of landing on held proxies again and again. Before any proxy sent
 * a list (a proxy on its own, or an older one) it wants one tunnel, exactly as before clustering.
 * The latest list wins: a proxy that stops appearing in it is forgotten, and a tunnel still open
 * to it no longer counts (it carries its streams until it closes, but the agent finds a proxy of
 * the list to replace it).
 */
export class AgentPool {
  private known: Set<string> | undefined;

  constructor(readonly connectionCount: number = DEFAULT_CONNECTION_COUNT) {
    if (!Number.isInteger(connectionCount) || connectionCount < 1) {
      throw new GateError(
        ErrorCodes.INVALID_ARGUMENT,
        `connection count must be a whole number of at least 1, not ${String(connectionCount)}`,
      );
    }
  }

  /** Takes the latest list of proxies; returns the ids it forgot (in the previous list, not in this one). */
  learn(view: ClusterView): string[] {
    const next = new Set(view.proxyIds);
    next.add(view.proxyId);
    const forgotten = this.known ? [...this.known].filter((id) => !next.has(id)) : [];
    this.known = next;
    return forgotten;
  }

  /** The proxies the agent knows of (sorted), or undefined before any proxy sent a list. */
  get proxies(): string[] | undefined {
    return this.known && [...this.known].sort();
  }

  /** Tunnels wanted now: one before any list, else `connectionCount` but at most one per proxy. */
  wanted(): number {
    if (!this.known) return 1;
    return Math.max(1, Math.min(this.connectionCount, this.known.size));
  }

  /** Tunnels that count toward `wanted`: those whose proxy is not known yet, and those to a listed proxy. */
  counted(tunnels: Iterable<PoolTunnel>): number {
    let n = 0;
    for (const tunnel of tunnels) if (tunnel.proxyId === undefined || !this.known || this.known.has(tunnel.proxyId)) n++;
    return n;
  }

  /** True when the agent should dial another tunnel. */
  short(tunnels: Iterable<PoolTunnel>): boolean {
    return this.counted(tunnels) < this.wanted();
  }

  /** Another of `tunnels` on the same proxy as `tunnel`, if any (only tunnels whose proxy is known compare). */
  duplicateOf<T extends PoolTunnel>(tunnel: PoolTunnel, tunnels: Iterable<T>): T | undefined {
    if (tunnel.proxyId === undefined) return undefined;
    for (const other of tunnels) if (other !== tunnel && other.proxyId === tunnel.proxyId) return other;
    return undefined;
  }
}

/** How a dial for one more tunnel ended. */
export type DialOutcome =
  /** A tunnel to a proxy the agent did not hold yet (or one that sends no view). */
  | 'added'
  /** It landed on a proxy the agent already holds: refused there (GATE_ERR_AGENT_DUPLICATE), or closed by the agent. */
  | 'duplicate'
  /** The dial, the TLS handshake or the admission failed. */
  | 'failed';

/**
 * When to dial next, with capped exponential backoff and full jitter (backoff.ts). Failures and
 * duplicates count apart: a duplicate proves the balancer and the proxies work (it only landed on
 * a proxy already held), so it resets the failure count and grows its own, which a new distinct
 * tunnel resets. Were a duplicate a failure, an agent behind a balancer that keeps sending it to
 * the same proxy would back off to the failure ceiling, and one that then lost a tunnel would wait
 * that long to replace it. Pure: `random` returns [0, 1).
 */
export class RedialSchedule {
  private failures = 0;
  private duplicates = 0;

  constructor(
    private readonly backoff: BackoffOptions = DEFAULT_BACKOFF,
    private readonly stableAfterMs = 10_000,
    private readonly random: () => number = Math.random,
  ) {}

  /** Milliseconds to wait after a dial that ended with `outcome` before the next one. */
  afterDial(outcome: DialOutcome): number {
    switch (outcome) {
      case 'added':
        this.failures = 0;
        this.duplicates = 0;
        // Still jittered: after a proxy restart every agent refills its pool at once.
        return backoffDelay(0, this.backoff, this.random);
      case 'duplicate':
        this.failures = 0;
        return backoffDelay(this.duplicates++, this.backoff, this.random);
      case 'failed':
        return backoffDelay(this.failures++, this.backoff, this.random);
    }
  }

  /** Milliseconds to wait after a tunnel that was up for `livedMs` ended: a short-lived one counts as a failure. */
  afterTunnelEnd(livedMs: number): number {
    if (livedMs >= this.stableAfterMs) this.failures = 0;
    return backoffDelay(this.failures++, this.backoff, this.random);
  }
}
