import { compareVersions, formatVersion, parseVersion } from '../vocabulary/semver.js';
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
  /**
   * True: a target lower than the running version is installed too (`--allow-downgrade`,
   * `updater.allow_downgrade`). Default false: refused, critical or not.
   */
  allowDowngrade?: boolean;
  /**
   * Set when the cluster's rollout manages this agent (`/v1/webapi/find`): `target` is the version
   * the rollout gives it, and `now` whether the rollout has reached it. The rollout, not the
   * maintenance window, decides when: its groups carry their own days and hours.
   */
  rollout?: { now: boolean };
}

export type UpgradeReason =
  | 'no-target' // the channel offers no version
  | 'up-to-date' // target == current (same precedence: build metadata ignored)
  | 'downgrade-refused' // target is lower and downgrades are not allowed
  | 'critical' // different and critical: now, whatever the window
  | 'in-window' // different and inside a window
  | 'outside-window' // different, wait for nextStart
  | 'no-schedule' // different, but no schedule to wait for: do nothing until one is exported
  | 'rollout' // different, and the cluster's rollout says now
  | 'rollout-wait'; // different, but the rollout has not reached this agent (or is halted)

export interface UpgradeDecision {
  upgrade: boolean;
  reason: UpgradeReason;
  /** Whether the target differs from the running version (an upgrade or a downgrade is on offer). */
  available: boolean;
  /** The target is lower than the running version. */
  downgrade: boolean;
  current: string;
  target: string | undefined;
  /** When the next window opens (with a schedule). */
  nextStart: Date | undefined;
}

/**
 * Whether the updater should install the target now. The rule is equality with the version the
 * cluster serves: a higher target is installed; a lower one only when `allowDowngrade` says so
 * (after a cluster rollback the operator lets the agents follow it down), never by default and
 * never because the channel calls it critical: a channel's answer is installed as root on every
 * enrolled agent, and an old version with known holes is what a forged answer would pick
 * (issue 37). Equality is Semantic
 * Versioning precedence (§10: build metadata does not count), so `1.2.3+b1` and `1.2.3+b2` are
 * the same version: a rebuild is not reinstalled, and a version command that prints no build
 * metadata still confirms an install. A non-critical change waits for the maintenance window and,
 * with no schedule at all, does not happen: the platform's updaters treat a missing schedule as
 * "not yet allowed", never as "any time". Under a rollout the window is not consulted: the
 * rollout's `now` decides (a downgrade still needs `allowDowngrade`). Pure.
 */
export function shouldUpgrade(q: UpgradeQuestion): UpgradeDecision {
  const current = formatVersion(parseVersion(q.current));
  const state = q.window ? maintenanceWindow(q.window, q.now) : undefined;
  const base = { current, nextStart: state?.nextStart };
  if (q.target === undefined) {
    return { ...base, upgrade: false, reason: 'no-target', available: false, downgrade: false, target: undefined };
  }
  const target = formatVersion(parseVersion(q.target));
  const order = compareVersions(target, current);
  if (order === 0) return { ...base, upgrade: false, reason: 'up-to-date', available: false, downgrade: false, target };
  const changed = { ...base, available: true, downgrade: order < 0, target };
  if (order < 0 && q.allowDowngrade !== true) return { ...changed, upgrade: false, reason: 'downgrade-refused' };
  if (q.rollout) return { ...changed, upgrade: q.rollout.now, reason: q.rollout.now ? 'rollout' : 'rollout-wait' };
  if (q.critical) return { ...changed, upgrade: true, reason: 'critical' };
  if (!state) return { ...changed, upgrade: false, reason: 'no-schedule' };
  return { ...changed, upgrade: state.inWindow, reason: state.inWindow ? 'in-window' : 'outside-window' };
}
