/**
 * `gate-mux/updater`: the automatic-update client — what the updater beside each agent asks the
 * proxy (target version, critical flag, maintenance schedule) and decides.
 * docs/api/updater.md documents each name; parts not named here are in `gate-mux/internal`.
 */
export { parseVersion, compareVersions, type SemVer } from '../vocabulary/semver.js';
export { parseMaintenanceConfig, formatMaintenanceConfig, type MaintenanceConfig, type Weekday } from './maintenance-config.js';
export { maintenanceWindow, type WindowState } from './maintenance-window.js';
export { shouldUpgrade, type UpgradeQuestion, type UpgradeDecision, type UpgradeReason } from './should-upgrade.js';
export { fetchTargetVersion, fetchCritical, type FetchTargetVersionOptions, type ProxyRequestOptions } from './target-version.js';
export { fetchSchedule, readSchedule, type ScheduleRead } from './schedule.js';
export { writeFileAtomic, type AtomicWriteResult, type AtomicWriteOptions } from './atomic-write.js';
export { acquireLock, type UpgradeLock } from './lock.js';
