/**
 * The agent-upgrade schedule of a `cluster_maintenance_config`, shared by the proxy's YAML (which
 * serves it, `proxy_service.cluster_maintenance_config`) and the updater (which reads the exported
 * file): one schema, checked by one function, written back by one formatter. Pure.
 */

/** 0 = Sunday ... 6 = Saturday, as `Date#getUTCDay`. */
export type Weekday = 0 | 1 | 2 | 3 | 4 | 5 | 6;

export const WEEKDAY_NAMES = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'] as const;

/** The `kind` of the exported document; the updater requires it. */
export const MAINTENANCE_CONFIG_KIND = 'cluster_maintenance_config';

/** The agent-upgrade schedule of a `cluster_maintenance_config`. */
export interface MaintenanceConfig {
  /** Hour (UTC, 0-23) at which each one-hour window starts. */
  utcStartHour: number;
  /** Days a window opens on, ascending, without repeats. */
  weekdays: Weekday[];
}

/** Where the `agent_upgrades` mapping is wrong: the path below it and why. */
export interface ScheduleIssue {
  /** Path below `agent_upgrades` (empty: the mapping itself). */
  path: Array<string | number>;
  why: string;
}

export type AgentUpgradesResult = { ok: true; config: MaintenanceConfig } | ({ ok: false } & ScheduleIssue);

/** `Mon`/`monday`/`MONDAY` → 1; undefined for anything else. Short (three-letter) or full English names. */
export function parseWeekday(name: string): Weekday | undefined {
  const lower = name.trim().toLowerCase();
  const index = WEEKDAY_NAMES.findIndex((day) => day.toLowerCase() === lower || day.slice(0, 3).toLowerCase() === lower);
  return index < 0 ? undefined : (index as Weekday);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Checks an `agent_upgrades` mapping: `utc_start_hour` required, an integer 0-23; `weekdays` day
 * names in short or long English form, case-insensitively, absent or empty meaning every day (the
 * platform's reading of an unrestricted window); no other field. The first problem is returned.
 */
export function checkAgentUpgrades(value: unknown): AgentUpgradesResult {
  if (!isObject(value)) return { ok: false, path: [], why: 'missing or not an object' };
  for (const key of Object.keys(value)) {
    if (key !== 'utc_start_hour' && key !== 'weekdays') return { ok: false, path: [key], why: 'unknown field' };
  }
  const hour = value.utc_start_hour;
  if (hour === undefined) return { ok: false, path: ['utc_start_hour'], why: 'required' };
  if (typeof hour !== 'number' || !Number.isInteger(hour) || hour < 0 || hour > 23) {
    return { ok: false, path: ['utc_start_hour'], why: `must be an integer hour from 0 to 23, got ${JSON.stringify(hour)}` };
  }
  const raw = value.weekdays ?? [];
  if (!Array.isArray(raw)) return { ok: false, path: ['weekdays'], why: 'must be a list of day names' };
  const days = new Set<Weekday>();
  for (const [i, entry] of (raw as unknown[]).entries()) {
    const day = typeof entry === 'string' ? parseWeekday(entry) : undefined;
    if (day === undefined) {
      return { ok: false, path: ['weekdays', i], why: `${JSON.stringify(entry)} is not a day name (Sun..Sat or Sunday..Saturday)` };
    }
    days.add(day);
  }
  const weekdays = days.size === 0 ? ([0, 1, 2, 3, 4, 5, 6] as Weekday[]) : [...days].sort((a, b) => a - b);
  return { ok: true, config: { utcStartHour: hour, weekdays } };
}

/**
 * The exported document, as the proxy serves it and the updater stores it: `kind` first, every
 * weekday spelled out, so the file reads the same whoever wrote it. parseMaintenanceConfig reads it back.
 */
export function formatMaintenanceConfig(config: MaintenanceConfig): string {
  return [
    `kind: ${MAINTENANCE_CONFIG_KIND}`,
    'spec:',
    '  agent_upgrades:',
    `    utc_start_hour: ${config.utcStartHour}`,
    `    weekdays: [${config.weekdays.map((d) => WEEKDAY_NAMES[d]).join(', ')}]`,
    '',
  ].join('\n');
}
