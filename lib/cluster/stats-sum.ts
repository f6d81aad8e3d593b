import type { RouteCounters, StatsSnapshot } from '../mux/stats.js';

/** A snapshot of nothing: the start of a sum over several multiplexers. */
export function emptySnapshot(): StatsSnapshot {
  return {
    accepted: 0,
    open: 0,
    rejected: 0,
    byRoute: {},
    byProtocol: {},
    failures: {},
    helloBytes: { count: 0, sum: 0, max: 0, histogram: {} },
    detectMs: { count: 0, sum: 0, histogram: {} },
  };
}

function addCounts(into: Record<string, number>, from: Readonly<Record<string, number>>): void {
  for (const [key, n] of Object.entries(from)) into[key] = (into[key] ?? 0) + n;
}

/**
 * Adds `from` into `into` (several listeners as one proxy). `withOpen: false` leaves the open
 * counts out: a retired listener's totals stay counted, its connections are no longer open.
 */
export function addSnapshot(into: StatsSnapshot, from: StatsSnapshot, withOpen = true): void {
  if (withOpen) into.open += from.open;
  into.accepted += from.accepted;
  into.rejected += from.rejected;
  for (const [name, r] of Object.entries(from.byRoute)) {
    const sum: RouteCounters = (into.byRoute[name] ??= { connections: 0, open: 0, bytesIn: 0, bytesOut: 0, errors: 0 });
    sum.connections += r.connections;
    if (withOpen) sum.open += r.open;
    sum.bytesIn += r.bytesIn;
    sum.bytesOut += r.bytesOut;
    sum.errors += r.errors;
  }
  addCounts(into.byProtocol, from.byProtocol);
  addCounts(into.failures, from.failures);
  into.helloBytes.count += from.helloBytes.count;
  into.helloBytes.sum += from.helloBytes.sum;
  into.helloBytes.max = Math.max(into.helloBytes.max, from.helloBytes.max);
  addCounts(into.helloBytes.histogram, from.helloBytes.histogram);
  into.detectMs.count += from.detectMs.count;
  into.detectMs.sum += from.detectMs.sum;
  addCounts(into.detectMs.histogram, from.detectMs.histogram);
}
