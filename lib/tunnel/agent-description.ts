import { ErrorCodes, GateError } from '../errors.js';
import { SERVICE_KINDS, type ServiceKind } from '../vocabulary/service-kinds.js';
import { isServerId } from './server-id.js';
import { parseVersion } from './version-rule.js';
import { checkLastUpdate, type LastUpdate } from '../updater/last-update.js';

// The store's copy of a description is checked the same way (cluster/inventory.ts).
export { checkLastUpdate, type LastUpdate };
import { DEFAULT_UPDATE_GROUP, isValidUpdateGroup } from '../wire/names.js';

export interface AgentService {
  kind: ServiceKind;
  name: string;
}

/**
 * What an agent tells the proxy about itself: the inventory's row. `upgrader` is the updater that
 * keeps it current (`GATE_EXT_UPGRADER`, which the updater package's unit drop-in sets to `unit`),
 * `none` when not enrolled in automatic updates.
 */
export interface AgentDescription {
  serverId: string;
  hostname: string;
  services: AgentService[];
  version: string;
  upgrader: string;
  /** What its updater's latest install came to (`last-update.json` in its state directory), when it has run. */
  lastUpdate?: LastUpdate;
  /**
   * The rollout group it belongs to (`updater.group` of its agent.yaml; `default` when none): the
   * cluster's rollout controller updates the groups in order (docs/updates.md, "Rollouts").
   */
  updateGroup: string;
}

/** The upgrader of an agent whose environment names none. */
export const NO_UPGRADER = 'none';
/** The environment variable the updater's unit drop-in sets. */
export const UPGRADER_ENV = 'GATE_EXT_UPGRADER';

/** Bounds: a description is one JSON line, far below a kilobyte for a real agent. */
export const MAX_DESCRIPTION_BYTES = 16 * 1024;
export const MAX_SERVICES = 256;
const MAX_HOSTNAME = 253;
const MAX_SERVICE_NAME = 128;
const UPGRADER_PATTERN = /^[A-Za-z0-9._-]{1,32}$/;
// C0, DEL, C1, and the Unicode line and bidirectional controls: nothing that can forge a log
// line or a table row, or reorder what an operator reads.
// eslint-disable-next-line no-control-regex
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's job.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** The upgrader an environment names: `GATE_EXT_UPGRADER` trimmed, `none` when unset or empty. */
export function upgraderFrom(env: NodeJS.ProcessEnv): string {
  const value = env[UPGRADER_ENV]?.trim();
  return value ? value : NO_UPGRADER;
}

/** Parses `KIND:NAME` (the agent's `--service` flag). GATE_ERR_INVALID_ARGUMENT when it is not one. */
export function parseService(text: string): AgentService {
  const colon = text.indexOf(':');
  const kind = colon < 0 ? '' : text.slice(0, colon).trim().toLowerCase();
  const name = colon < 0 ? '' : text.slice(colon + 1).trim();
  if (!(SERVICE_KINDS as readonly string[]).includes(kind) || name === '' || name.length > MAX_SERVICE_NAME || name !== clean(name)) {
    throw new GateError(
      ErrorCodes.INVALID_ARGUMENT,
      `a service is KIND:NAME with KIND one of ${SERVICE_KINDS.join(', ')} and a printable NAME of at most ${MAX_SERVICE_NAME} characters, not ${JSON.stringify(text)}`,
    );
  }
  return { kind: kind as ServiceKind, name };
}

function clean(text: string): string {
  return text.replace(UNPRINTABLE, '');
}

/** A description whose fields were made safe to store and show, and what had to be changed. */
export interface ReadDescription {
  description: AgentDescription;
  /** Fields sanitised (control characters removed, cut to length, unknown service kinds left out). */
  sanitised: string[];
}

function invalid(why: string): GateError {
  return new GateError(ErrorCodes.AGENT_DESCRIPTION_INVALID, `the agent's self-description is refused: ${why}`);
}

/**
 * Reads one description line as the proxy receives it from the network. What cannot be trusted to
 * mean anything is refused with GATE_ERR_AGENT_DESCRIPTION_INVALID: more than 16 KiB, not a JSON
 * object, a server ID that is not a UUID, a version that is not semver (the compatibility rule needs
 * it), an upgrader that is not a short token, an update group that is not a group name, services that are not a list of {kind, name}. What is
 * only untidy is sanitised and said so: control characters in the hostname or a service name
 * removed, lengths cut, unknown service kinds (a newer agent's) left out, a `lastUpdate` that is
 * not a record (updater/last-update.ts) left out. Pure.
 */
export function readDescription(line: string | Buffer): ReadDescription {
  const bytes = typeof line === 'string' ? Buffer.byteLength(line) : line.length;
  if (bytes > MAX_DESCRIPTION_BYTES) throw invalid(`${bytes} bytes, more than ${MAX_DESCRIPTION_BYTES}`);
  let value: unknown;
  try {
    value = JSON.parse(line.toString());
  } catch {
    throw invalid('not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('not a JSON object');
  const raw = value as Record<string, unknown>;
  const sanitised: string[] = [];
  if (typeof raw.serverId !== 'string' || !isServerId(raw.serverId)) throw invalid('server_id is not a UUID');
  if (typeof raw.version !== 'string' || !parseVersion(raw.version))
    throw invalid(`version ${JSON.stringify(String(raw.version).slice(0, 64))} is not semver (MAJOR.MINOR.PATCH)`);
  if (typeof raw.upgrader !== 'string' || !UPGRADER_PATTERN.test(raw.upgrader))
    throw invalid('upgrader is not a short token of [A-Za-z0-9._-]');
  // Optional: an agent older than rollouts says nothing, and is in the default group.
  if (raw.updateGroup !== undefined && (typeof raw.updateGroup !== 'string' || !isValidUpdateGroup(raw.updateGroup)))
    throw invalid('updateGroup is not a group name ([A-Za-z0-9._-], at most 64)');
  const updateGroup = typeof raw.updateGroup === 'string' ? raw.updateGroup : DEFAULT_UPDATE_GROUP;
  if (typeof raw.hostname !== 'string') throw invalid('hostname is not a string');
  let hostname = clean(raw.hostname);
  if (hostname.length > MAX_HOSTNAME) hostname = hostname.slice(0, MAX_HOSTNAME);
  if (hostname !== raw.hostname) sanitised.push('hostname');
  if (!Array.isArray(raw.services) || raw.services.length > MAX_SERVICES)
    throw invalid(`services is not a list of at most ${MAX_SERVICES}`);
  const services: AgentService[] = [];
  for (const item of raw.services as unknown[]) {
    const service = item as Record<string, unknown> | null;
    if (typeof service !== 'object' || service === null || typeof service.kind !== 'string' || typeof service.name !== 'string')
      throw invalid('a service is not {kind, name}');
    if (!(SERVICE_KINDS as readonly string[]).includes(service.kind)) {
      sanitised.push('services');
      continue;
    }
    const name = clean(service.name).slice(0, MAX_SERVICE_NAME);
    if (name !== service.name) sanitised.push('services');
    if (name !== '') services.push({ kind: service.kind as ServiceKind, name });
  }
  // Optional and only informative: a record that is not one is left out (said so), never a refusal.
  const lastUpdate = raw.lastUpdate === undefined ? undefined : checkLastUpdate(raw.lastUpdate);
  if (raw.lastUpdate !== undefined && (!lastUpdate || JSON.stringify(lastUpdate) !== JSON.stringify(raw.lastUpdate)))
    sanitised.push('lastUpdate');
  return {
    description: {
      serverId: raw.serverId.toLowerCase(),
      hostname,
      services,
      version: raw.version,
      upgrader: raw.upgrader,
      updateGroup,
      ...(lastUpdate ? { lastUpdate } : {}),
    },
    sanitised: [...new Set(sanitised)],
  };
}

/** One description as the agent sends it: a JSON line. */
export function descriptionLine(description: AgentDescription): string {
  const { serverId, hostname, services, version, upgrader, updateGroup } = description;
  const lastUpdate = description.lastUpdate;
  return `${JSON.stringify({ serverId, hostname, services, version, upgrader, updateGroup, ...(lastUpdate ? { lastUpdate } : {}) })}\n`;
}
