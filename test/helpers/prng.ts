/**
 * A tiny seeded PRNG (mulberry32) so fuzz and random-split tests are reproducible: a failure
 * prints its seed, and the same seed replays the same inputs.
 */
export interface Prng {
  /** Uniform 32-bit unsigned integer. */
  u32(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
  /** Uniform integer in [min, max]. */
  range(min: number, max: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  /** n random bytes. */
  bytes(n: number): Buffer;
  /** A random element of a non-empty array. */
  pick<T>(items: readonly T[]): T;
}

export function prng(seed: number): Prng {
  let state = seed >>> 0;
  const u32 = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  const int = (n: number): number => (n <= 0 ? 0 : Math.floor((u32() / 0x100000000) * n));
  return {
    u32,
    int,
    range: (min, max) => min + int(max - min + 1),
    chance: (p) => u32() / 0x100000000 < p,
    bytes: (n) => {
      const out = Buffer.allocUnsafe(n);
      for (let i = 0; i < n; i++) out[i] = u32() & 0xff;
      return out;
    },
    pick: <T>(items: readonly T[]): T => {
      if (items.length === 0) throw new RangeError('pick from an empty array');
      return items[int(items.length)]!;
    },
  };
}
