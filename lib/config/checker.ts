import { parseAddress, type HostPort, type ParseAddressOptions } from './address.js';
import { formatDuration, parseDuration } from './duration.js';
import { nearestKey } from './suggest.js';
import { SECTION_OF } from './gate-keys.js';

/**
 * Reading a parsed YAML value: every problem is recorded with its key path and what was expected;
 * all problems are collected (not just the first) so one edit fixes a file. Shared by every file
 * gate reads.
 */

export type PathSegment = string | number;

export interface ConfigIssue {
  path: PathSegment[];
  message: string;
}

export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(segment)) out += out ? `.${segment}` : segment;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out || '(top level)';
}

/** A value as a problem message shows it (`"text"`, `a list`, `number 3`). */
export function describe(value: unknown): string {
  if (value === null || value === undefined) return 'an empty value';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return `"${value.length > 60 ? `${value.slice(0, 57)}...` : value}"`;
  return `${typeof value} ${String(value)}`;
}

export function isPlainMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Collects problems (each with its key path) while reading a parsed YAML value; shared by every file gate reads. */
export class Checker {
  readonly issues: ConfigIssue[] = [];
  readonly warnings: ConfigIssue[] = [];

  fail(path: PathSegment[], message: string): undefined {
    this.issues.push({ path, message });
    return undefined;
  }

  warn(path: PathSegment[], message: string): void {
    this.warnings.push({ path, message });
  }

  /** A section: absent or empty (`auth_service:`) reads as an empty mapping. */
  section(value: unknown, path: PathSegment[]): Record<string, unknown> | undefined {
    if (value === undefined || value === null) return {};
    if (isPlainMap(value)) return value;
    return this.fail(path, `expected a mapping, got ${describe(value)}`);
  }

  /** Unknown keys are errors; a near miss or a key from another section gets a hint. */
  keys(map: Record<string, unknown>, known: readonly string[], path: PathSegment[]): void {
    for (const key of Object.keys(map)) {
      if (known.includes(key)) continue;
      const home = SECTION_OF[key];
      const near = nearestKey(key, known);
      if (home !== undefined) this.fail([...path, key], `unknown key here (it belongs under ${home})`);
      else if (near !== undefined) this.fail([...path, key], `unknown key (did you mean "${near}"?)`);
      else this.fail([...path, key], `unknown key; expected one of: ${known.join(', ')}`);
    }
  }

  string(value: unknown, path: PathSegment[], expected: string): string | undefined {
    if (typeof value === 'string' && value.trim() !== '') return value.trim();
    return this.fail(path, `expected ${expected}, got ${describe(value)}`);
  }

  address(value: unknown, path: PathSegment[], expected: string, options: ParseAddressOptions): HostPort | undefined {
    if (typeof value !== 'string') return this.fail(path, `expected ${expected}, got ${describe(value)}`);
    const result = parseAddress(value, options);
    if (!result.ok) return this.fail(path, `expected ${expected}: ${result.reason}`);
    return result.address;
  }

  /** A public address: one string or a list of strings. */
  addressList(value: unknown, path: PathSegment[], defaultPort: number): HostPort[] {
    if (value === undefined) return [];
    const expected = 'a host name or IP with an optional port, or a list of them';
    const items = typeof value === 'string' ? [value] : value;
    if (!Array.isArray(items)) {
      this.fail(path, `expected ${expected}, got ${describe(value)}`);
      return [];
    }
    const out: HostPort[] = [];
    items.forEach((item, index) => {
      const itemPath = typeof value === 'string' ? path : [...path, index];
      const address = this.address(item, itemPath, 'host[:port]', { defaultPort });
      if (address) out.push(address);
    });
    return out;
  }

  /**
   * A duration within `bounds` (default: any up to `MAX_DURATION_MS`). `min` is the shortest that
   * still makes sense for the key (`detect_timeout: 1ms` would cut every real client); `zero`
   * allows 0 below it, where 0 means "never" (idle_timeout).
   */
  duration(value: unknown, path: PathSegment[], fallback: number, bounds: DurationBounds = {}): number {
    if (value === undefined) return fallback;
    const ms = value === 0 ? 0 : typeof value === 'string' ? parseDuration(value) : undefined; // a bare 0 needs no unit
    if (ms === undefined) {
      this.fail(path, `expected a duration such as 10s, 500ms or 1m30s, got ${describe(value)}`);
      return fallback;
    }
    return this.bounded(ms, path, fallback, bounds);
  }

  private bounded(ms: number, path: PathSegment[], fallback: number, bounds: DurationBounds): number {
    const max = bounds.max ?? MAX_DURATION_MS;
    if (ms === 0 && bounds.zero) return 0;
    const zeroNote = bounds.zero ? ' (or 0)' : '';
    if (bounds.min !== undefined && ms < bounds.min) {
      this.fail(
        path,
        `expected at least ${formatDuration(bounds.min)}${zeroNote}${bounds.why ? ` (${bounds.why})` : ''}, got ${formatDuration(ms)}`,
      );
      return fallback;
    }
    if (ms > max) {
      this.fail(path, `expected at most ${formatDuration(max)}, got ${formatDuration(ms)}`);
      return fallback;
    }
    return ms;
  }
}

/** What `Checker.duration` accepts for one key. */
export interface DurationBounds {
  min?: number;
  max?: number;
  /** 0 is allowed below `min` (it means "never"). */
  zero?: boolean;
  /** Why the minimum, for the message. */
  why?: string;
}

/** Node's timers hold at most 2^31-1 ms (about 24.8 days); a longer one fires at once. Whole hours below it. */
export const MAX_DURATION_MS = 596 * 3_600_000;

/**
 * The shortest deadline a client on an ordinary link can meet: a round trip or two, and a
 * scheduler's hiccup. Below it the deadline cuts real clients, not slow ones.
 */
export const MIN_DEADLINE_MS = 100;
