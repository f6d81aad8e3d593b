/** Per-route traffic counters. Bytes are counted on the client socket once it closes. */
export interface RouteCounters {
  connections: number;
  open: number;
  bytesIn: number;
  bytesOut: number;
  errors: number;
}

export interface StatsSnapshot {
  accepted: number;
  open: number;
  /** Connections refused before detection (limits, untrusted PROXY source, shutdown). */
  rejected: number;
  byRoute: Record<string, RouteCounters>;
  byProtocol: Record<string, number>;
  /** Connections that failed detection or routing, by GATE_ERR_* code. */
  failures: Record<string, number>;
  /** ClientHello handshake sizes: count, sum, max and a power-of-two histogram (upper bound → count). */
  helloBytes: { count: number; sum: number; max: number; histogram: Record<string, number> };
  /**
   * Milliseconds from accept to the routing decision, for connections that reached one: count,
   * sum and a histogram over DETECT_MS_BOUNDS (upper bound → count in that bucket, not cumulative).
   */
  detectMs: { count: number; sum: number; histogram: Record<string, number> };
}

/**
 * Upper bounds (ms) of the detection-time buckets. Fixed, so that an exported histogram keeps the
 * same series; the last one is the default detection deadline (a longer deadline lands in +Inf).
 */
export const DETECT_MS_BOUNDS: readonly number[] = [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000];

function emptyRoute(): RouteCounters {
  return { connections: 0, open: 0, bytesIn: 0, bytesOut: 0, errors: 0 };
}

/** Mutable counters owned by one multiplexer. Plain objects: cheap to bump on the hot path. */
export class Stats {
  accepted = 0;
  open = 0;
  rejected = 0;
  private readonly byRoute = new Map<string, RouteCounters>();
  private readonly byProtocol = new Map<string, number>();
  private readonly failures = new Map<string, number>();
  private readonly hello = { count: 0, sum: 0, max: 0, histogram: new Map<number, number>() };
  /** One slot per DETECT_MS_BOUNDS entry and one for the rest: a plain array, no allocation per connection. */
  private readonly detect = { count: 0, sum: 0, buckets: new Array<number>(DETECT_MS_BOUNDS.length + 1).fill(0) };

  route(name: string): RouteCounters {
    let counters = this.byRoute.get(name);
    if (!counters) {
      counters = emptyRoute();
      this.byRoute.set(name, counters);
    }
    return counters;
  }

  protocol(name: string): void {
    this.byProtocol.set(name, (this.byProtocol.get(name) ?? 0) + 1);
  }

  failure(code: string): void {
    this.failures.set(code, (this.failures.get(code) ?? 0) + 1);
  }

  helloSize(bytes: number): void {
    this.hello.count++;
    this.hello.sum += bytes;
    if (bytes > this.hello.max) this.hello.max = bytes;
    let bucket = 256;
    while (bucket < bytes) bucket *= 2;
    this.hello.histogram.set(bucket, (this.hello.histogram.get(bucket) ?? 0) + 1);
  }

  detectTime(ms: number): void {
    const detect = this.detect;
    detect.count++;
    detect.sum += ms;
    let i = 0;
    while (i < DETECT_MS_BOUNDS.length && DETECT_MS_BOUNDS[i]! < ms) i++;
    detect.buckets[i]!++;
  }

  snapshot(): StatsSnapshot {
    const byRoute: Record<string, RouteCounters> = {};
    for (const [name, c] of this.byRoute) byRoute[name] = { ...c };
    const histogram: Record<string, number> = {};
    for (const [bucket, n] of [...this.hello.histogram].sort((a, b) => a[0] - b[0])) histogram[String(bucket)] = n;
    return {
      accepted: this.accepted,
      open: this.open,
      rejected: this.rejected,
      byRoute,
      byProtocol: Object.fromEntries(this.byProtocol),
      failures: Object.fromEntries(this.failures),
      helloBytes: { count: this.hello.count, sum: this.hello.sum, max: this.hello.max, histogram },
      detectMs: { count: this.detect.count, sum: this.detect.sum, histogram: detectHistogram(this.detect.buckets) },
    };
  }
}

function detectHistogram(buckets: readonly number[]): Record<string, number> {
  const out: Record<string, number> = {};
  buckets.forEach((n, i) => {
    if (n > 0) out[i < DETECT_MS_BOUNDS.length ? String(DETECT_MS_BOUNDS[i]) : '+Inf'] = n;
  });
  return out;
}
