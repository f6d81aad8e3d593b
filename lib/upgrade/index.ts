// The automatic-update client: what the updater beside each agent asks and decides.
export { parseVersion, compareVersions, formatVersion, type SemVer } from './semver.js';
export {
  parseMaintenanceConfig,
  formatMaintenanceConfig,
  parseWeekday,
  WEEKDAY_NAMES,
  MAINTENANCE_CONFIG_KIND,
  type MaintenanceConfig,
  type Weekday,
} from './maintenance-config.js';
export { maintenanceWindow, WINDOW_MS, type WindowState } from './maintenance-window.js';
export { shouldUpgrade, type UpgradeQuestion, type UpgradeDecision, type UpgradeReason } from './should-upgrade.js';
export {
  fetchTargetVersion,
  fetchCritical,
  channelVersionUrl,
  channelCriticalUrl,
  type FetchTargetVersionOptions,
  type ProxyRequestOptions,
} from './target-version.js';
export { fetchSchedule, readSchedule, schedulePath, scheduleUrl, DEFAULT_SCHEDULE_PATH, SCHEDULE_PATH_ENV, type ScheduleRead } from './schedule.js';
export { writeFileAtomic, type AtomicWriteResult } from './atomic-write.js';
export { acquireLock, type UpgradeLock } from './lock.js';
export { splitCommandLine, commandWithVersion } from './command-line.js';
