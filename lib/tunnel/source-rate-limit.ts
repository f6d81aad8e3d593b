import type { RateLimit } from '../vocabulary/join-limits.js';

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * A token bucket per source address. `take` is O(1); the map is bounded: past `maxSources`
 * entries, buckets that refilled completely are dropped (they carry no state), and if that is not
 * enough the oldest go, so a flood of distinct addresses costs memory up to the bound only.
 */
export class SourceRateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private limit: RateLimit,
    private readonly maxSources = 50_000,
  ) {}

  /** New limits (a reload); buckets keep their tokens, capped at the new burst. */
  setLimit(limit: RateLimit): void {
    this.limit = limit;
  }

  /** Takes one request's token for `source`; false (refuse) when its bucket is empty. */
  take(source: string, now = Date.now()): boolean {
    const bucket = this.refilled(source, now);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /** Milliseconds until `source` has a token again (0 when it has one now). */
  retryAfterMs(source: string, now = Date.now()): number {
    const bucket = this.buckets.get(source);
    if (!bucket || this.limit.perMinute <= 0) return bucket && bucket.tokens < 1 ? 60_000 : 0;
    const tokens = Math.min(this.limit.burst, bucket.tokens + ((now - bucket.at) * this.limit.perMinute) / 60_000);
    return tokens >= 1 ? 0 : Math.ceil(((1 - tokens) * 60_000) / this.limit.perMinute);
  }

  /** Sources tracked now (for tests and metrics). */
  get size(): number {
    return this.buckets.size;
  }

  private refilled(source: string, now: number): Bucket {
    let bucket = this.buckets.get(source);
    if (!bucket) {
      if (this.buckets.size >= this.maxSources) this.prune(now);
      bucket = { tokens: this.limit.burst, at: now };
      this.buckets.set(source, bucket);
      return bucket;
    }
    const elapsed = Math.max(0, now - bucket.at);
    bucket.tokens = Math.min(this.limit.burst, bucket.tokens + (elapsed * this.limit.perMinute) / 60_000);
    bucket.at = now;
    return bucket;
  }

  private prune(now: number): void {
    for (const [source, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) * this.limit.perMinute) / 60_000 >= this.limit.burst) this.buckets.delete(source);
    }
    for (const source of this.buckets.keys()) {
      if (this.buckets.size < this.maxSources) break;
      this.buckets.delete(source);
    }
  }
}
