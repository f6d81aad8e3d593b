import { ErrorCodes, GateError } from '../errors.js';
import type { MaintenanceConfig } from './maintenance-config.js';

/** Every window lasts one hour from `utc_start_hour`. */
export const WINDOW_MS = 60 * 60 * 1000;
const DAY_MS = 24 * WINDOW_MS;

export interface WindowState {
  /** `now` is inside a window: [start, start + 1 h). */
  inWindow: boolean;
  /** Start of the window `now` is in, when it is in one. */
  currentStart: Date | undefined;
  /** Start of the first window strictly after `now`. */
  nextStart: Date;
}

/**
 * Where `now` stands against the schedule. Pure, all in UTC: the weekday that counts is the one
 * the window *starts* on. A window starting at 23:00 ends at midnight exclusive, so no window
 * reaches into the next day; the next start may be tomorrow, next week (the same weekday seven
 * days on, when today's window has passed and no other day is listed) or across a month or year end.
 */
export function maintenanceWindow(config: MaintenanceConfig, now: Date): WindowState {
  const t = now.getTime();
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const days = new Set<number>(config.weekdays);
  let currentStart: Date | undefined;
  // Today and the next seven days: day 7 is today's weekday again, for a schedule of one day whose
  // window today has already passed.
  for (let d = 0; d <= 7; d++) {
    const start = midnight + d * DAY_MS + config.utcStartHour * WINDOW_MS;
    if (!days.has(new Date(start).getUTCDay())) continue;
    if (start <= t && t < start + WINDOW_MS) currentStart = new Date(start);
    if (start > t) return { inWindow: currentStart !== undefined, currentStart, nextStart: new Date(start) };
  }
  // Unreachable with at least one weekday (parseMaintenanceConfig guarantees it).
  throw new GateError(ErrorCodes.UPGRADE_SCHEDULE_INVALID, 'weekdays: a maintenance schedule needs at least one weekday');
}
