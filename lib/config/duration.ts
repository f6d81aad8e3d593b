/** Units the platform's configuration files use (Go's `time.ParseDuration`, without µs/ns). */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Milliseconds for a duration such as `10s`, `500ms`, `1m30s` or `0`, the Go-style spelling the
 * platform's files use; undefined when the text is not one. Fractions are allowed (`1.5s`) and
 * rounded to whole milliseconds.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (trimmed === '0') return 0;
  if (!/^(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const part of trimmed.matchAll(/([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/g)) {
    total += Number(part[1]) * (UNIT_MS[part[2] ?? ''] ?? Number.NaN);
  }
  return Number.isFinite(total) ? Math.round(total) : undefined;
}

/** The shortest spelling `parseDuration` reads back to `ms` (whole milliseconds): `10s`, `1h`, `1500ms`, `0`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0';
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
