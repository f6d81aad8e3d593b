import { parse as parseYaml } from 'yaml';
import { ErrorCodes, GateError } from '../errors.js';

/** 0 = Sunday ... 6 = Saturday, as `Date#getUTCDay`. */
export type Weekday = 0 | 1 | 2 | 3 | 4 | 5 | 6;

export const WEEKDAY_NAMES = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'] as const;

/** The agent-upgrade schedule of a `cluster_maintenance_config`. */
export interface MaintenanceConfig {
  /** Hour (UTC, 0-23) at which each one-hour window starts. */
  utcStartHour: number;
  /** Days a window opens on, ascending, without repeats. */
  weekdays: Weekday[];
}

const FIELD = 'spec.agent_upgrades';

function invalid(path: string, why: string): GateError {
  return new GateError(ErrorCodes.UPGRADE_SCHEDULE_INVALID, `${path}: ${why}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `Mon`/`monday`/`MONDAY` → 1; undefined for anything else. Short (three-letter) or full English names. */
export function parseWeekday(name: string): Weekday | undefined {
  const lower = name.trim().toLowerCase();
  const index = WEEKDAY_NAMES.findIndex((day) => day.toLowerCase() === lower || day.slice(0, 3).toLowerCase() === lower);
  return index < 0 ? undefined : (index as Weekday);
}

/**
 * Parses and validates an exported `cluster_maintenance_config` (YAML or JSON, JSON being YAML):
 *
 *     kind: cluster_maintenance_config
 *     spec:
 *       agent_upgrades:
 *         utc_start_hour: 2
 *         weekdays: [Mon, wednesday]
 *
 * `utc_start_hour` is required, an integer 0-23. `weekdays` names days in short or long English
 * form, case-insensitively; absent or empty means every day (the platform's reading of an
 * unrestricted window). `kind`, when present, must be `cluster_maintenance_config`. Pure; throws
 * GATE_ERR_UPGRADE_SCHEDULE_INVALID whose message starts with the field path at fault.
 */
export function parseMaintenanceConfig(text: string): MaintenanceConfig {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new GateError(ErrorCodes.UPGRADE_SCHEDULE_INVALID, `not YAML or JSON: ${(err as Error).message.split('\n')[0]}`, { cause: err });
  }
  if (!isObject(doc)) throw invalid('(document)', 'expected a cluster_maintenance_config object');
  if (doc.kind !== undefined && doc.kind !== 'cluster_maintenance_config') {
    throw invalid('kind', `expected cluster_maintenance_config, got ${JSON.stringify(doc.kind)}`);
  }
  if (!isObject(doc.spec)) throw invalid('spec', 'missing or not an object');
  const upgrades = doc.spec.agent_upgrades;
  if (!isObject(upgrades)) throw invalid(FIELD, 'missing or not an object');
  for (const key of Object.keys(upgrades)) {
    if (key !== 'utc_start_hour' && key !== 'weekdays') throw invalid(`${FIELD}.${key}`, 'unknown field');
  }
  const hour = upgrades.utc_start_hour;
  if (hour === undefined) throw invalid(`${FIELD}.utc_start_hour`, 'required');
  if (typeof hour !== 'number' || !Number.isInteger(hour) || hour < 0 || hour > 23) {
    throw invalid(`${FIELD}.utc_start_hour`, `must be an integer hour from 0 to 23, got ${JSON.stringify(hour)}`);
  }
  const raw = upgrades.weekdays ?? [];
  if (!Array.isArray(raw)) throw invalid(`${FIELD}.weekdays`, 'must be a list of day names');
  const days = new Set<Weekday>();
  raw.forEach((entry: unknown, i) => {
    const day = typeof entry === 'string' ? parseWeekday(entry) : undefined;
    if (day === undefined) {
      throw invalid(`${FIELD}.weekdays[${i}]`, `${JSON.stringify(entry)} is not a day name (Sun..Sat or Sunday..Saturday)`);
    }
    days.add(day);
  });
  const weekdays = days.size === 0 ? ([0, 1, 2, 3, 4, 5, 6] as Weekday[]) : [...days].sort((a, b) => a - b);
  return { utcStartHour: hour, weekdays };
}
