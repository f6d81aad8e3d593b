// The automatic-update client: what the updater beside each agent asks and decides.
export { parseVersion, compareVersions, formatVersion, type SemVer } from './semver.js';
export { parseMaintenanceConfig, parseWeekday, WEEKDAY_NAMES, type MaintenanceConfig, type Weekday } from './maintenance-config.js';
export { maintenanceWindow, WINDOW_MS, type WindowState } from './maintenance-window.js';
export { shouldUpgrade, type UpgradeQuestion, type UpgradeDecision, type UpgradeReason } from './should-upgrade.js';
export { fetchTargetVersion, channelVersionUrl, type FetchTargetVersionOptions } from './target-version.js';
