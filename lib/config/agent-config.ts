import { formatAddress, parseAddress } from './address.js';
import { AGENT_SCHEMA, DEFAULT_AGENT_STATE_DIR, DEFAULT_UPGRADE_CHANNEL, PACKAGE_MANAGERS } from './agent-schema.js';
import { channelNameProblem } from './channel.js';
import { parseYamlFile, readConfigText } from './load.js';
import { keysOf } from './schema.js';
import { Checker, describe, MIN_DEADLINE_MS, type PathSegment } from './checker.js';
import { parseCaPin } from '../pki/ca-pin.js';
import { SERVICE_KINDS, type ServiceKind } from '../vocabulary/service-kinds.js';
import { isValidAgentName } from '../vocabulary/agent-name.js';
import { DEFAULT_UPDATE_GROUP, isValidUpdateGroup } from '../wire/names.js';

/**
 * The agent's configuration file (`/etc/gate/agent.yaml`, written by `gate-mux agent configure`):
 * what `gate-mux agent` takes as flags, the resources it serves (each with its `public_addr`, as
 * the platform gives every service one), and how the updater beside it installs a new version.
 * Read by `gate-mux agent --config` and by `gate-upgrade`. Pure: parse and validate only.
 */

/** Where the packaged units and gate-upgrade look for it. */
export const DEFAULT_AGENT_CONFIG_PATH = '/etc/gate/agent.yaml';
export { DEFAULT_AGENT_STATE_DIR, DEFAULT_UPGRADE_CHANNEL };

/** A resource's kind is the kind of service the agent announces for it (`--service KIND:NAME`). */
export const RESOURCE_KINDS = SERVICE_KINDS;
export type ResourceKind = ServiceKind;
export { PACKAGE_MANAGERS };
export type PackageManager = (typeof PACKAGE_MANAGERS)[number];

/** One resource the agent serves: what the proxy routes to through its tunnel. */
export interface AgentResource {
  kind: ResourceKind;
  name: string;
  /** `host:port` the agent dials, in its own network. */
  target: string;
  /** The addresses clients know it by (a name or IP, or several). */
  publicAddr: string[];
}

export interface AgentUpdaterConfig {
  channel: string;
  /** The rollout group the agent reports (`updater.group`; default `default`). */
  group: string;
  /** How to install a version; unset: the one the machine has (apt, then dnf, then zypper). */
  packageManager: PackageManager | undefined;
  /** Instead of a package manager: a command with `{version}` (run without a shell). */
  installCommand: string | undefined;
  /** Prints the installed version; default: the package manager's database. */
  versionCommand: string | undefined;
  /** Install a version lower than the running one too (`updater.allow_downgrade`); default false. */
  allowDowngrade: boolean;
}

export interface AgentFileConfig {
  /** The proxy's web address, `host:port`: joining, renewal, the updater (and the tunnel unless `tunnelAddr`). */
  proxy: string;
  tunnelAddr: string | undefined;
  serverName: string | undefined;
  name: string;
  stateDir: string;
  /** Join token, needed only until the first join (then the state directory holds the identity). */
  token: string | undefined;
  caPin: string | undefined;
  /** A pre-issued identity instead of joining. */
  certFile: string | undefined;
  keyFile: string | undefined;
  caFile: string | undefined;
  /** `allow:` as written; `allowedTargets` adds the resources' targets. */
  allow: string[];
  resources: AgentResource[];
  connectionCount: number | undefined;
  dialTimeoutMs: number | undefined;
  logLevel: string | undefined;
  updater: AgentUpdaterConfig;
}

// Key lists come from the one declaration of the file (agent-schema.ts), which the JSON Schema for
// editors is generated from too.
const TOP_KEYS = keysOf(AGENT_SCHEMA);
const RESOURCE_KEYS = keysOf(AGENT_SCHEMA, 'resources', '*');
const UPDATER_KEYS = keysOf(AGENT_SCHEMA, 'updater');

/** `host:port` as the agent's flags take it, normalised (IPv6 bracketed), or a recorded problem. */
function hostPort(c: Checker, value: unknown, path: PathSegment[]): string | undefined {
  if (typeof value !== 'string') return c.fail(path, `expected host:port, got ${describe(value)}`);
  const parsed = parseAddress(value.trim());
  if (!parsed.ok) return c.fail(path, `expected host:port: ${parsed.reason}`);
  return formatAddress(parsed.address);
}

function optionalString(c: Checker, value: unknown, path: PathSegment[], expected: string): string | undefined {
  return value === undefined || value === null ? undefined : c.string(value, path, expected);
}

function oneOf<T extends string>(c: Checker, value: unknown, path: PathSegment[], allowed: readonly T[]): T | undefined {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  return c.fail(path, `expected one of ${allowed.join(', ')}, got ${describe(value)}`);
}

function list(c: Checker, value: unknown, path: PathSegment[]): unknown[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value;
  c.fail(path, `expected a list, got ${describe(value)}`);
  return [];
}

function readResource(c: Checker, value: unknown, path: PathSegment[]): AgentResource | undefined {
  const map = c.section(value, path);
  if (!map) return undefined;
  c.keys(map, RESOURCE_KEYS, path);
  const kind = oneOf(c, map.kind, [...path, 'kind'], RESOURCE_KINDS);
  const name = c.string(map.name, [...path, 'name'], 'the resource name');
  const target = hostPort(c, map.target, [...path, 'target']);
  const publicAddr: string[] = [];
  if (map.public_addr !== undefined) {
    const items = typeof map.public_addr === 'string' ? [map.public_addr] : map.public_addr;
    if (!Array.isArray(items))
      c.fail([...path, 'public_addr'], `expected a host name or IP, or a list of them, got ${describe(map.public_addr)}`);
    else
      items.forEach((item, i) => {
        const text = c.string(
          item,
          typeof map.public_addr === 'string' ? [...path, 'public_addr'] : [...path, 'public_addr', i],
          'a host name or IP',
        );
        if (text !== undefined) publicAddr.push(text);
      });
  }
  if (!kind || !name || !target) return undefined;
  return { kind, name, target, publicAddr };
}

function readUpdater(c: Checker, value: unknown): AgentUpdaterConfig {
  const map = c.section(value, ['updater']) ?? {};
  c.keys(map, UPDATER_KEYS, ['updater']);
  let channel = DEFAULT_UPGRADE_CHANNEL;
  if (map.channel !== undefined) {
    const text = c.string(map.channel, ['updater', 'channel'], 'a channel name such as default or stable/cloud');
    const problem = text === undefined ? undefined : channelNameProblem(text);
    if (problem) c.fail(['updater', 'channel'], problem);
    else if (text !== undefined) channel = text;
  }
  let group = DEFAULT_UPDATE_GROUP;
  if (map.group !== undefined) {
    const text = c.string(map.group, ['updater', 'group'], 'a group name such as dev or prod');
    if (text !== undefined && !isValidUpdateGroup(text))
      c.fail(['updater', 'group'], `${JSON.stringify(text)} is not a group name: letters, digits, ".", "_", "-", at most 64`);
    else if (text !== undefined) group = text;
  }
  const packageManager =
    map.package_manager === undefined ? undefined : oneOf(c, map.package_manager, ['updater', 'package_manager'], PACKAGE_MANAGERS);
  const installCommand = optionalString(c, map.install_command, ['updater', 'install_command'], 'a command with {version}');
  if (installCommand !== undefined && !installCommand.includes('{version}'))
    c.fail(['updater', 'install_command'], 'the command must contain {version}, where the target version goes');
  const versionCommand = optionalString(
    c,
    map.version_command,
    ['updater', 'version_command'],
    'a command that prints the installed version',
  );
  if (installCommand !== undefined && packageManager === undefined && versionCommand === undefined) {
    c.fail(
      ['updater', 'install_command'],
      'an install_command needs a version_command (or a package_manager) to confirm what it installed',
    );
  }
  let allowDowngrade = false;
  if (map.allow_downgrade !== undefined) {
    if (typeof map.allow_downgrade === 'boolean') allowDowngrade = map.allow_downgrade;
    else c.fail(['updater', 'allow_downgrade'], `expected true or false, got ${describe(map.allow_downgrade)}`);
  }
  return { channel, group, packageManager, installCommand, versionCommand, allowDowngrade };
}

/** Validates the parsed YAML of an agent configuration file; every problem is collected with its key path. */
export function validateAgentConfig(raw: unknown): {
  value: AgentFileConfig | undefined;
  issues: Checker['issues'];
  warnings: Checker['warnings'];
} {
  const c = new Checker();
  const top = c.section(raw, []);
  if (!top) return { value: undefined, issues: c.issues, warnings: c.warnings };
  c.keys(top, TOP_KEYS, []);
  const proxy = hostPort(c, top.proxy, ['proxy']);
  const tunnelAddr = top.tunnel_addr === undefined ? undefined : hostPort(c, top.tunnel_addr, ['tunnel_addr']);
  const name = c.string(top.name, ['name'], 'the agent name');
  if (name !== undefined && !isValidAgentName(name))
    c.fail(['name'], 'expected letters, digits, dots, hyphens and underscores (a DNS-label-like name)');
  let caPin: string | undefined;
  if (top.ca_pin !== undefined) {
    const text = c.string(top.ca_pin, ['ca_pin'], 'sha256:<64 hex digits>');
    try {
      caPin = text === undefined ? undefined : parseCaPin(text);
    } catch (err) {
      c.fail(['ca_pin'], (err as Error).message);
    }
  }
  const allow = list(c, top.allow, ['allow'])
    .map((item, i) => hostPort(c, item, ['allow', i]))
    .filter((a): a is string => a !== undefined);
  const resources = list(c, top.resources, ['resources'])
    .map((item, i) => readResource(c, item, ['resources', i]))
    .filter((r): r is AgentResource => r !== undefined);
  let connectionCount: number | undefined;
  if (top.connection_count !== undefined) {
    if (Number.isInteger(top.connection_count) && (top.connection_count as number) >= 1 && (top.connection_count as number) <= 64)
      connectionCount = top.connection_count as number;
    else c.fail(['connection_count'], `expected a whole number from 1 to 64, got ${describe(top.connection_count)}`);
  }
  const dialTimeoutMs =
    top.dial_timeout === undefined ? undefined : c.duration(top.dial_timeout, ['dial_timeout'], 10_000, { min: MIN_DEADLINE_MS });
  const updater = readUpdater(c, top.updater);
  const value: AgentFileConfig | undefined =
    proxy === undefined || name === undefined || c.issues.length > 0
      ? undefined
      : {
          proxy,
          tunnelAddr,
          serverName: optionalString(c, top.server_name, ['server_name'], 'a host name'),
          name,
          stateDir: optionalString(c, top.state_dir, ['state_dir'], 'a directory path') ?? DEFAULT_AGENT_STATE_DIR,
          token: optionalString(c, top.token, ['token'], 'the join token'),
          caPin,
          certFile: optionalString(c, top.cert_file, ['cert_file'], 'a file path'),
          keyFile: optionalString(c, top.key_file, ['key_file'], 'a file path'),
          caFile: optionalString(c, top.ca_file, ['ca_file'], 'a file path'),
          allow,
          resources,
          connectionCount,
          dialTimeoutMs,
          logLevel: optionalString(c, top.log_level, ['log_level'], 'a log level'),
          updater,
        };
  if (allow.length === 0 && resources.length === 0)
    c.warn(['allow'], 'neither allow nor resources names a target: the agent will refuse every connection');
  return { value: c.issues.length > 0 ? undefined : value, issues: c.issues, warnings: c.warnings };
}

/** Parses agent configuration text; ConfigError (GATE_ERR_CONFIG_INVALID) names the key and line of every problem. */
export function parseAgentConfig(text: string, source = '<agent config>'): { config: AgentFileConfig; warnings: string[] } {
  const { value, warnings } = parseYamlFile(text, source, validateAgentConfig);
  return { config: value, warnings };
}

/** Reads and parses an agent configuration file. */
export async function loadAgentConfig(path: string): Promise<{ config: AgentFileConfig; warnings: string[] }> {
  return parseAgentConfig(await readConfigText(path), path);
}

/** The targets the agent lets the proxy reach: `allow` and every resource's target, once each. */
export function allowedTargets(config: Pick<AgentFileConfig, 'allow' | 'resources'>): string[] {
  return [...new Set([...config.allow, ...config.resources.map((r) => r.target)])];
}

/** The services the agent announces to the proxy (its inventory listing), one per resource. */
export function servicesOf(config: Pick<AgentFileConfig, 'resources'>): Array<{ kind: string; name: string }> {
  return config.resources.map((r) => ({ kind: r.kind, name: r.name }));
}
