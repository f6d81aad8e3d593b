/**
 * The two manifests an operator writes to run a rollout, read the way the platform's "Managed
 * Updates v2" reads them (Teleport RFD 0184), so its files carry over: `autoupdate_config` (how:
 * mode, strategy, the ordered groups and their windows) and `autoupdate_version` (what: from
 * `start_version` to `target_version`). Validated with every problem keyed (manifest.ts's way);
 * stored normalised (durations in their shortest spelling, days spelled `Mon`..`Sun` or `*`), and
 * read back by `rolloutConfigOf` / `rolloutVersionOf` for the controller. Pure.
 */
import { formatDuration, parseDuration } from '../config/duration.js';
import { describe, type PathSegment } from '../config/checker.js';
import { parseWeekday, type Weekday } from '../config/maintenance-schedule.js';
import { parseVersion } from '../tunnel/version-rule.js';
import { isValidUpdateGroup } from '../wire/names.js';
import type { Issues, ValidManifest } from './manifest.js';
import { AUTOUPDATE_CONFIG_KIND, AUTOUPDATE_CONFIG_NAME, AUTOUPDATE_VERSION_KIND, AUTOUPDATE_VERSION_NAME } from './resource-kinds.js';

export const ROLLOUT_MODES = ['enabled', 'disabled', 'suspended'] as const;
export type RolloutMode = (typeof ROLLOUT_MODES)[number];
export const ROLLOUT_STRATEGIES = ['halt-on-error', 'time-based'] as const;
export type RolloutStrategy = (typeof ROLLOUT_STRATEGIES)[number];

/** `max_in_flight`: a count of agents, or a share of the group's. */
export type InFlight = { count: number } | { percent: number };

export interface RolloutGroupSpec {
  name: string;
  /** Days (UTC) the group may start; all seven when `*`. */
  days: Weekday[];
  /** The hour (UTC, 0-23) the group's window opens; the window lasts an hour (time-based). */
  startHour: number;
  /** halt-on-error: how long after the previous group is done this one may start. */
  waitMs: number;
  /** Agents updated first; the rest wait until every canary is back on the target. */
  canaryCount: number;
  maxInFlight: InFlight;
}

export interface RolloutConfig {
  mode: RolloutMode;
  strategy: RolloutStrategy;
  canaryTimeoutMs: number;
  groups: RolloutGroupSpec[];
}

export interface RolloutVersion {
  startVersion: string;
  targetVersion: string;
  mode: RolloutMode;
}

/** Defaults, in hours as the platform's are: a canary has an hour to come back. */
export const DEFAULT_CANARY_TIMEOUT_MS = 3_600_000;
export const DEFAULT_MAX_IN_FLIGHT: InFlight = { percent: 10 };
/** More groups than this is not an ordering an operator can follow. */
export const MAX_GROUPS = 50;
export const MAX_CANARY_COUNT = 100;
/** A duration longer than this (a year) is a typo. */
const MAX_DURATION_MS = 366 * 24 * 3_600_000;

const DAY_SHORT = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;
const ALL_DAYS: Weekday[] = [0, 1, 2, 3, 4, 5, 6];

/** The most restrictive of two modes: disabled, then suspended, then enabled. */
export function strictestMode(a: RolloutMode, b: RolloutMode): RolloutMode {
  if (a === 'disabled' || b === 'disabled') return 'disabled';
  if (a === 'suspended' || b === 'suspended') return 'suspended';
  return 'enabled';
}

/** How many agents `max_in_flight` allows in a group of `size` (at least one). */
export function inFlightLimit(limit: InFlight, size: number): number {
  if ('count' in limit) return Math.max(1, limit.count);
  return Math.max(1, Math.floor((size * limit.percent) / 100));
}

function formatInFlight(limit: InFlight): string | number {
  return 'count' in limit ? limit.count : `${limit.percent}%`;
}

function parseInFlight(value: unknown): InFlight | undefined {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 1_000_000) return { count: value };
  if (typeof value === 'string') {
    const m = /^\s*([0-9]{1,3})\s*%\s*$/.exec(value);
    if (m && Number(m[1]) >= 1 && Number(m[1]) <= 100) return { percent: Number(m[1]) };
    if (/^\s*[0-9]{1,7}\s*$/.test(value) && Number(value) >= 1) return { count: Number(value) };
  }
  return undefined;
}

function readDuration(c: Issues, value: unknown, path: PathSegment[], fallback: number): number {
  if (value === undefined) return fallback;
  const ms = typeof value === 'string' ? parseDuration(value) : value === 0 ? 0 : undefined;
  if (ms === undefined || ms > MAX_DURATION_MS) {
    c.fail(path, `${describe(value)} is not a duration with units (48h, 30s, 1h30m) of at most a year`);
    return fallback;
  }
  return ms;
}

function readMode(c: Issues, value: unknown, path: PathSegment[]): RolloutMode | undefined {
  if (typeof value === 'string' && (ROLLOUT_MODES as readonly string[]).includes(value)) return value as RolloutMode;
  return c.fail(
    path,
    value === undefined ? `required: ${ROLLOUT_MODES.join(', ')}` : `${describe(value)} is not one of ${ROLLOUT_MODES.join(', ')}`,
  );
}

function readDays(c: Issues, value: unknown, path: PathSegment[]): Weekday[] {
  if (value === undefined) return ALL_DAYS;
  if (!Array.isArray(value) || value.length === 0) {
    c.fail(path, `expected a non-empty list of day names (Mon..Sun) or ["*"], got ${describe(value)}`);
    return ALL_DAYS;
  }
  const days = new Set<Weekday>();
  for (const [i, entry] of value.entries()) {
    if (entry === '*') for (const d of ALL_DAYS) days.add(d);
    else {
      const day = typeof entry === 'string' ? parseWeekday(entry) : undefined;
      if (day === undefined) c.fail([...path, i], `${describe(entry)} is not a day name (Mon..Sun, Monday..Sunday) or *`);
      else days.add(day);
    }
  }
  return [...days].sort((a, b) => a - b);
}

function readGroup(c: Issues, value: unknown, path: PathSegment[], strategy: RolloutStrategy | undefined): RolloutGroupSpec | undefined {
  const map = c.map(value, path);
  if (!map) return undefined;
  const before = c.list.length;
  c.keys(map, ['name', 'days', 'start_hour', 'wait', 'canary_count', 'max_in_flight'], path);
  const name = map.name;
  if (typeof name !== 'string' || !isValidUpdateGroup(name))
    c.fail([...path, 'name'], `expected a group name (letters, digits, ".", "_", "-", at most 64), got ${describe(name)}`);
  const days = readDays(c, map.days, [...path, 'days']);
  const hour = map.start_hour ?? 0;
  if (typeof hour !== 'number' || !Number.isInteger(hour) || hour < 0 || hour > 23)
    c.fail([...path, 'start_hour'], `${typeof hour === 'number' ? hour : describe(hour)} is not an hour 0-23 (UTC)`);
  const waitMs = readDuration(c, map.wait, [...path, 'wait'], 0);
  if (map.wait !== undefined && strategy === 'time-based')
    c.fail([...path, 'wait'], 'wait orders groups one after another: it applies to strategy halt-on-error, not time-based');
  const canaryCount = map.canary_count ?? 0;
  if (typeof canaryCount !== 'number' || !Number.isInteger(canaryCount) || canaryCount < 0 || canaryCount > MAX_CANARY_COUNT)
    c.fail(
      [...path, 'canary_count'],
      `${typeof canaryCount === 'number' ? canaryCount : describe(canaryCount)} is not a count 0-${MAX_CANARY_COUNT}`,
    );
  else if (canaryCount > 0 && strategy === 'time-based')
    c.fail([...path, 'canary_count'], 'canaries gate a group before the next: they apply to strategy halt-on-error, not time-based');
  const maxInFlight = map.max_in_flight === undefined ? DEFAULT_MAX_IN_FLIGHT : parseInFlight(map.max_in_flight);
  if (!maxInFlight)
    c.fail([...path, 'max_in_flight'], `${describe(map.max_in_flight)} is not a count of agents (1 or more) or a percentage (1%-100%)`);
  if (c.list.length > before || !maxInFlight) return undefined;
  return { name: name as string, days, startHour: hour as number, waitMs, canaryCount: canaryCount as number, maxInFlight };
}

/** `autoupdate_config`: one per cluster. */
export function readAutoupdateConfig(c: Issues, doc: Record<string, unknown>): ValidManifest | undefined {
  const before = c.list.length;
  const agents = headerAndAgents(c, doc, AUTOUPDATE_CONFIG_NAME);
  if (!agents) return undefined;
  const path = ['spec', 'agents'];
  c.keys(agents, ['mode', 'strategy', 'canary_timeout', 'schedules'], path);
  const mode = readMode(c, agents.mode, [...path, 'mode']);
  let strategy: RolloutStrategy | undefined = 'halt-on-error';
  if (agents.strategy !== undefined) {
    if (typeof agents.strategy === 'string' && (ROLLOUT_STRATEGIES as readonly string[]).includes(agents.strategy))
      strategy = agents.strategy as RolloutStrategy;
    else strategy = c.fail([...path, 'strategy'], `${describe(agents.strategy)} is not one of ${ROLLOUT_STRATEGIES.join(', ')}`);
  }
  const canaryTimeoutMs = readDuration(c, agents.canary_timeout, [...path, 'canary_timeout'], DEFAULT_CANARY_TIMEOUT_MS);
  if (canaryTimeoutMs === 0 && agents.canary_timeout !== undefined)
    c.fail([...path, 'canary_timeout'], 'a canary needs some time to come back');
  const schedules = c.map(agents.schedules, [...path, 'schedules']);
  const groups: RolloutGroupSpec[] = [];
  if (schedules) {
    c.keys(schedules, ['regular'], [...path, 'schedules']);
    const regular = schedules.regular;
    const listPath = [...path, 'schedules', 'regular'];
    if (!Array.isArray(regular) || regular.length === 0)
      c.fail(listPath, `expected a non-empty list of groups ({name, days, start_hour, ...}), got ${describe(regular)}`);
    else if (regular.length > MAX_GROUPS) c.fail(listPath, `${regular.length} groups; at most ${MAX_GROUPS}`);
    else
      for (const [i, entry] of regular.entries()) {
        const group = readGroup(c, entry, [...listPath, i], strategy);
        if (!group) continue;
        if (groups.some((g) => g.name === group.name)) c.fail([...listPath, i, 'name'], `group ${group.name} is listed twice`);
        else groups.push(group);
      }
  }
  if (c.list.length > before || !mode || !strategy) return undefined;
  return {
    kind: AUTOUPDATE_CONFIG_KIND,
    name: AUTOUPDATE_CONFIG_NAME,
    document: {
      kind: AUTOUPDATE_CONFIG_KIND,
      version: 'v1',
      metadata: { name: AUTOUPDATE_CONFIG_NAME },
      spec: {
        agents: {
          mode,
          strategy,
          canary_timeout: formatDuration(canaryTimeoutMs),
          schedules: {
            regular: groups.map((g) => ({
              name: g.name,
              days: g.days.length === 7 ? ['*'] : g.days.map((d) => DAY_SHORT[d]),
              start_hour: g.startHour,
              wait: formatDuration(g.waitMs),
              canary_count: g.canaryCount,
              max_in_flight: formatInFlight(g.maxInFlight),
            })),
          },
        },
      },
    },
  };
}

/** `autoupdate_version`: one per cluster. */
export function readAutoupdateVersion(c: Issues, doc: Record<string, unknown>): ValidManifest | undefined {
  const before = c.list.length;
  const agents = headerAndAgents(c, doc, AUTOUPDATE_VERSION_NAME);
  if (!agents) return undefined;
  const path = ['spec', 'agents'];
  c.keys(agents, ['start_version', 'target_version', 'mode'], path);
  const version = (key: string): string | undefined => {
    const value = agents[key];
    if (typeof value === 'string' && parseVersion(value.replace(/^v/, ''))) return value.replace(/^v/, '');
    return c.fail(
      [...path, key],
      value === undefined ? 'required: a version such as 1.3.0' : `${describe(value)} is not a version (MAJOR.MINOR.PATCH)`,
    );
  };
  const startVersion = version('start_version');
  const targetVersion = version('target_version');
  const mode = agents.mode === undefined ? 'enabled' : readMode(c, agents.mode, [...path, 'mode']);
  if (c.list.length > before || !startVersion || !targetVersion || !mode) return undefined;
  return {
    kind: AUTOUPDATE_VERSION_KIND,
    name: AUTOUPDATE_VERSION_NAME,
    document: {
      kind: AUTOUPDATE_VERSION_KIND,
      version: 'v1',
      metadata: { name: AUTOUPDATE_VERSION_NAME },
      spec: { agents: { start_version: startVersion, target_version: targetVersion, mode } },
    },
  };
}

/** kind/version/metadata checked; the `spec.agents` mapping, or undefined (with the issue). */
function headerAndAgents(c: Issues, doc: Record<string, unknown>, name: string): Record<string, unknown> | undefined {
  c.keys(doc, ['kind', 'version', 'metadata', 'spec'], []);
  if (doc.version !== undefined && doc.version !== 'v1') c.fail(['version'], `expected v1, got ${describe(doc.version)}`);
  if (doc.metadata !== undefined) {
    const metadata = c.map(doc.metadata, ['metadata']);
    if (metadata) {
      c.keys(metadata, ['name'], ['metadata']);
      if (metadata.name !== undefined && metadata.name !== name)
        c.fail(['metadata', 'name'], `expected ${name} (there is one per cluster), got ${describe(metadata.name)}`);
    }
  }
  const spec = c.map(doc.spec, ['spec']);
  return spec && c.child(spec, 'agents', ['spec']);
}

type Json = Record<string, unknown>;

/** The configuration a stored `autoupdate_config` holds (validated when written), or undefined. */
export function rolloutConfigOf(document: Json): RolloutConfig | undefined {
  const agents = (document.spec as { agents?: Json } | undefined)?.agents;
  if (!agents) return undefined;
  const regular = (agents.schedules as { regular?: unknown } | undefined)?.regular;
  if (!Array.isArray(regular)) return undefined;
  const groups: RolloutGroupSpec[] = [];
  for (const g of regular as Json[]) {
    const days = Array.isArray(g.days)
      ? g.days.includes('*')
        ? ALL_DAYS
        : (g.days as unknown[])
            .map((d) => (typeof d === 'string' ? parseWeekday(d) : undefined))
            .filter((d): d is Weekday => d !== undefined)
      : ALL_DAYS;
    const maxInFlight = parseInFlight(g.max_in_flight) ?? DEFAULT_MAX_IN_FLIGHT;
    if (typeof g.name !== 'string') return undefined;
    groups.push({
      name: g.name,
      days,
      startHour: typeof g.start_hour === 'number' ? g.start_hour : 0,
      waitMs: typeof g.wait === 'string' ? (parseDuration(g.wait) ?? 0) : 0,
      canaryCount: typeof g.canary_count === 'number' ? g.canary_count : 0,
      maxInFlight,
    });
  }
  const mode = agents.mode as RolloutMode;
  const strategy = agents.strategy as RolloutStrategy;
  if (!ROLLOUT_MODES.includes(mode) || !ROLLOUT_STRATEGIES.includes(strategy)) return undefined;
  return {
    mode,
    strategy,
    canaryTimeoutMs:
      typeof agents.canary_timeout === 'string'
        ? (parseDuration(agents.canary_timeout) ?? DEFAULT_CANARY_TIMEOUT_MS)
        : DEFAULT_CANARY_TIMEOUT_MS,
    groups,
  };
}

/** The versions a stored `autoupdate_version` holds, or undefined. */
export function rolloutVersionOf(document: Json): RolloutVersion | undefined {
  const agents = (document.spec as { agents?: Json } | undefined)?.agents;
  const startVersion = agents?.start_version;
  const targetVersion = agents?.target_version;
  const mode = (agents?.mode ?? 'enabled') as RolloutMode;
  if (typeof startVersion !== 'string' || typeof targetVersion !== 'string' || !ROLLOUT_MODES.includes(mode)) return undefined;
  return { startVersion, targetVersion, mode };
}
