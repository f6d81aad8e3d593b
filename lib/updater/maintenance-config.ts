import { parse as parseYaml } from 'yaml';
import { checkAgentUpgrades, MAINTENANCE_CONFIG_KIND, type MaintenanceConfig } from '../config/maintenance-schedule.js';
import { ErrorCodes, GateError } from '../errors.js';

export {
  parseWeekday,
  formatMaintenanceConfig,
  WEEKDAY_NAMES,
  MAINTENANCE_CONFIG_KIND,
  type MaintenanceConfig,
  type Weekday,
} from '../config/maintenance-schedule.js';

const FIELD = 'spec.agent_upgrades';

function invalid(path: string, why: string): GateError {
  return new GateError(ErrorCodes.UPGRADE_SCHEDULE_INVALID, `${path}: ${why}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
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
 * `kind` is required and must be `cluster_maintenance_config` (the platform's exported
 * file always carries it, so a file without it is something else that happens to have a `spec`).
 * `spec.agent_upgrades` as checkAgentUpgrades reads it. Pure; throws
 * GATE_ERR_UPGRADE_SCHEDULE_INVALID whose message starts with the field path at fault.
 */
export function parseMaintenanceConfig(text: string): MaintenanceConfig {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new GateError(ErrorCodes.UPGRADE_SCHEDULE_INVALID, `not YAML or JSON: ${(err as Error).message.split('\n')[0]}`, { cause: err });
  }
  if (!isObject(doc)) throw invalid('(document)', `expected a ${MAINTENANCE_CONFIG_KIND} object`);
  if (doc.kind === undefined) throw invalid('kind', `required: ${MAINTENANCE_CONFIG_KIND}`);
  if (doc.kind !== MAINTENANCE_CONFIG_KIND) {
    throw invalid('kind', `expected ${MAINTENANCE_CONFIG_KIND}, got ${JSON.stringify(doc.kind)}`);
  }
  if (!isObject(doc.spec)) throw invalid('spec', 'missing or not an object');
  const result = checkAgentUpgrades(doc.spec.agent_upgrades);
  if (result.ok) return result.config;
  const below = result.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('');
  throw invalid(`${FIELD}${below}`, result.why);
}
