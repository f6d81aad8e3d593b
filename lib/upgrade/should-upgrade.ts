import { compareVersions, formatVersion, parseVersion } from './semver.js';
import type { MaintenanceConfig } from './maintenance-config.js';
import { maintenanceWindow } from './maintenance-window.js';

export interface UpgradeQuestion {
  /** The running version (`1.2.3` or `v1.2.3`). */
  current: string;
  /** The channel's target, or undefined when it answered `none`. */
  target: string | undefined;
  /** Critical updates do not wait for the maintenance window. */
  critical?: boolean;
  /** The exported schedule; undefined when none (valid) has been exported yet. */
  window: MaintenanceConfig | undefined;
  now: Date;
}

export type UpgradeReason =
  | 'no-target' // the channel offers no version
  | 'up-to-date' // target == current (or older: never downgrade)
  | 'critical' // newer and critical: now, whatever the window
  | 'in-window' // newer and inside a window
  | 'outside-window' // newer, wait for nextStart
  | 'no-schedule'; // newer, but no schedule to wait for: do nothing until one is exported

export interface UpgradeDecision {
  upgrade: boolean;
  reason: UpgradeReason;
  /** Whether the target is newer than the running version. */
  available: boolean;
  current: string;
  target: string | undefined;
  /** When the next window opens (with a schedule). */
  nextStart: Date | undefined;
}

/**
 * Whether the updater should upgrade now. Only a strictly newer target counts (an older one is
 * never installed: a channel rolled back by mistake must not downgrade a fleet). A non-critical
 * upgrade waits for the maintenance window and, with no schedule at all, does not happen: the
 * platform's updaters treat a missing schedule as "not yet allowed", never as "any time". Pure.
 */
export function shouldUpgrade(q: UpgradeQuestion): UpgradeDecision {
  const current = formatVersion(parseVersion(q.current));
  const state = q.window ? maintenanceWindow(q.window, q.now) : undefined;
  const base = { current, nextStart: state?.nextStart };
  if (q.target === undefined) return { ...base, upgrade: false, reason: 'no-target', available: false, target: undefined };
  const target = formatVersion(parseVersion(q.target));
  if (compareVersions(target, current) <= 0) return { ...base, upgrade: false, reason: 'up-to-date', available: false, target };
  if (q.critical) return { ...base, upgrade: true, reason: 'critical', available: true, target };
  if (!state) return { ...base, upgrade: false, reason: 'no-schedule', available: true, target };
  return { ...base, upgrade: state.inWindow, reason: state.inWindow ? 'in-window' : 'outside-window', available: true, target };
}
