import { redactProxyValue } from '../client/proxy-config.js';
import type { ChannelMismatch } from './cluster-member.js';

export type { ChannelMismatch };

/**
 * What `/readyz` asks before it tells a load balancer to send traffic here. Each source answers
 * for one part (the listeners, the cluster membership); the proxy is ready when every one is.
 */

export interface Readiness {
  ready: boolean;
  /** Shown as is in `/readyz`'s JSON, for the operator. */
  detail: Record<string, unknown>;
}

export interface ReadinessSource {
  /** The key of this source's answer in `/readyz`'s `checks`. */
  readonly name: string;
  ready(): Readiness;
}

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, Readiness>;
}

/** Asks every source; a source that throws is not ready (and says why), it does not break the probe. */
export function readinessOf(sources: Iterable<ReadinessSource>): ReadinessReport {
  const checks: Record<string, Readiness> = {};
  let ready = true;
  for (const source of sources) {
    let answer: Readiness;
    try {
      answer = source.ready();
    } catch (err) {
      answer = { ready: false, detail: { error: (err as Error).message } };
    }
    checks[source.name] = answer;
    if (!answer.ready) ready = false;
  }
  return { ready, checks };
}

export interface ListenerState {
  name: string;
  /** `host:port` as configured (port 0: any). */
  address: string;
  listening: boolean;
}

/**
 * Ready when every configured listener is accepting. None at all (not started yet, or closing)
 * is not ready: a load balancer must not send traffic to a proxy that cannot take it.
 */
export function listenersReadiness(listeners: () => ListenerState[]): ReadinessSource {
  return {
    name: 'listeners',
    ready() {
      const list = listeners();
      return {
        ready: list.length > 0 && list.every((l) => l.listening),
        detail: { listeners: list },
      };
    },
  };
}

/**
 * What readiness needs of a cluster member (lib/cluster/cluster-member.ts, whose getters these are,
 * so the member itself is passed): registered in the route store within its TTL, draining or not,
 * and the channel mismatches it has seen.
 */
export interface ClusterMemberView {
  readonly proxyId: string;
  readonly registered: boolean;
  readonly isDraining?: boolean;
  channelMismatches?(): ChannelMismatch[];
}

/**
 * Ready while registered in the store and not draining: a proxy the others cannot find would get
 * clients it cannot serve for agents held elsewhere, and a draining one must get no new clients.
 * Channel mismatches are reported but leave the proxy ready: taking every proxy out of the load
 * balancer over a configuration difference would be an outage, not a warning.
 */
export function clusterReadiness(member: ClusterMemberView, store: string): ReadinessSource {
  // `redis://:password@host` is configuration; /readyz answers anyone who reaches diag_addr.
  const shownStore = redactProxyValue(store);
  return {
    name: 'cluster',
    ready() {
      const draining = member.isDraining ?? false;
      const registered = member.registered;
      return {
        ready: registered && !draining,
        detail: {
          proxyId: member.proxyId,
          store: shownStore,
          registered,
          draining,
          channelMismatches: member.channelMismatches?.() ?? [],
        },
      };
    },
  };
}
