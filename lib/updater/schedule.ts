import { readFile } from 'node:fs/promises';
import { ErrorCodes } from '../errors.js';
import { MAINTENANCE_SCHEDULE_PATH } from '../wire/names.js';
import { parseMaintenanceConfig, type MaintenanceConfig } from './maintenance-config.js';
import { unsealSchedule } from './schedule-seal.js';
import { getFromProxy, proxyUrl, type ProxyRequestOptions } from './target-version.js';

/** Where the exported schedule lives unless `--schedule` or the environment says otherwise. */
export const DEFAULT_SCHEDULE_PATH = '/etc/gate-upgrade.d/schedule';
/** The environment variable that moves it. */
export const SCHEDULE_PATH_ENV = 'GATE_UPGRADE_SCHEDULE';

/** The schedule file: the flag, else `GATE_UPGRADE_SCHEDULE`, else `/etc/gate-upgrade.d/schedule`. */
export function schedulePath(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag || env[SCHEDULE_PATH_ENV] || DEFAULT_SCHEDULE_PATH;
}

export interface ScheduleRead {
  /** The schedule, when the file exists and is valid. */
  schedule: MaintenanceConfig | undefined;
  /** Why there is none, as the line the updater prints on stderr. */
  warning: string | undefined;
}

/**
 * Reads the exported schedule. A missing or invalid file is not an error: the updater goes on
 * with critical updates only, and says so in a warning that names the file and the problem.
 */
export async function readSchedule(path: string): Promise<ScheduleRead> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return {
      schedule: undefined,
      warning: `warning: no maintenance schedule has been exported yet (${path}: ${why}): only critical updates would be applied`,
    };
  }
  const body = unsealSchedule(text);
  if (typeof body !== 'string') {
    return {
      schedule: undefined,
      warning: `warning: no valid maintenance schedule has been exported yet (${path}: ${body.message}): only critical updates would be applied`,
    };
  }
  try {
    return { schedule: parseMaintenanceConfig(body), warning: undefined };
  } catch (err) {
    return {
      schedule: undefined,
      warning: `warning: no valid maintenance schedule has been exported yet (${path}: ${(err as Error).message}): only critical updates would be applied`,
    };
  }
}

/** The schedule endpoint's URL on `proxy`. */
export function scheduleUrl(proxy: string): string {
  return proxyUrl(proxy, MAINTENANCE_SCHEDULE_PATH);
}

/**
 * The cluster's maintenance schedule as the proxy serves it: the document text (validated, so an
 * invalid answer is never written) and its reading. Errors: GATE_ERR_UPGRADE_SCHEDULE_UNAVAILABLE
 * (non-200, e.g. 404 when the proxy has none), GATE_ERR_UPGRADE_SCHEDULE_INVALID,
 * GATE_ERR_UPGRADE_INSECURE, GATE_ERR_FETCH_*.
 */
export async function fetchSchedule(options: ProxyRequestOptions): Promise<{ text: string; schedule: MaintenanceConfig }> {
  const text = await getFromProxy(
    scheduleUrl(options.proxy),
    options,
    'the maintenance schedule',
    ErrorCodes.UPGRADE_SCHEDULE_UNAVAILABLE,
    16 * 1024,
  );
  return { text, schedule: parseMaintenanceConfig(text) };
}
