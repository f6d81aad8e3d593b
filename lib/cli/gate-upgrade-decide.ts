// What gate-upgrade decides before it changes anything, shared by `dry-run` and `run` so both say
// the same: how to reach the proxy (flags, else the agent's file), the version the proxy offers
// and whether it is critical, the rollout's answer for this agent (find), the version installed
// and running now, and how this host installs one.
import { accessSync, constants } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { packageVersion } from './package-info.js';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import { DEFAULT_AGENT_CONFIG_PATH, DEFAULT_UPGRADE_CHANNEL, loadAgentConfig, type AgentFileConfig } from '../config/agent-config.js';
import { splitCommandLine } from '../updater/command-line.js';
import {
  commandMethod,
  detectPackageManager,
  packageManagerMethod,
  versionOfPackage,
  type InstallMethod,
} from '../updater/install-method.js';
import { maintenanceWindow } from '../updater/maintenance-window.js';
import { describeEnd, runCommand } from '../updater/run-command.js';
import { readSchedule, schedulePath } from '../updater/schedule.js';
import { formatVersion, parseVersion } from '../vocabulary/semver.js';
import { shouldUpgrade, type UpgradeDecision } from '../updater/should-upgrade.js';
import { fetchCritical, fetchTargetVersion, type ProxyRequestOptions } from '../updater/target-version.js';
import { fetchFind, type FindAnswer } from '../updater/find.js';
import { serverIdForName } from '../tunnel/server-id.js';
import { DEFAULT_UPDATE_GROUP, isValidUpdateGroup } from '../wire/names.js';
import { type DecisionValues, UsageError, print, warn } from './gate-upgrade-usage.js';

async function readCa(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `--ca ${path}: ${(err as Error).message}`, { cause: err });
  }
}

interface ConnectionValues {
  config?: string | undefined;
  proxy?: string | undefined;
  ca?: string | undefined;
  'server-name'?: string | undefined;
  'insecure-http'?: boolean | undefined;
}

/**
 * The agent's configuration file, when the command reads one: the one --config names, else the
 * default one unless --proxy says where to go instead. Undefined with --proxy and no --config.
 */
export async function agentConfigFor(values: ConnectionValues): Promise<AgentFileConfig | undefined> {
  if (!values.config && values.proxy) return undefined;
  const path = values.config ?? DEFAULT_AGENT_CONFIG_PATH;
  try {
    const { config, warnings } = await loadAgentConfig(path);
    for (const warning of warnings) warn(`warning: ${warning}`);
    return config;
  } catch (err) {
    if (!values.config && (err as { cause?: NodeJS.ErrnoException }).cause?.code === 'ENOENT') {
      throw new UsageError(
        `--proxy is required when there is no agent configuration file (${path}; gate-mux agent configure writes it, --config names another)`,
      );
    }
    throw err;
  }
}

/** How to reach the proxy, from the flags and the agent's file (flags win); and the file itself. */
export async function connection(
  values: ConnectionValues,
  read?: { agent: AgentFileConfig | undefined },
): Promise<{ request: ProxyRequestOptions; agent: AgentFileConfig | undefined }> {
  const agent = read ? read.agent : await agentConfigFor(values);
  const proxy = values.proxy ?? `https://${agent!.proxy}`;
  // Plain http (--insecure-http) has no certificate to check.
  const ca = values.ca ? await readCa(values.ca) : agent && !/^http:/i.test(proxy) ? await clusterCa(agent) : undefined;
  const serverName = values['server-name'] ?? agent?.serverName;
  return {
    request: { proxy, ...(ca ? { ca } : {}), ...(serverName ? { serverName } : {}), allowHttp: values['insecure-http'] === true },
    agent,
  };
}

/**
 * The CA the agent trusts the proxy by (its ca_file, else ca.pem in its state directory, written
 * at its join) beside Node's trust store, so a proxy with a certificate from a public CA is
 * trusted too. GATE_ERR_AGENT_STATE before the agent has joined.
 */
async function clusterCa(agent: AgentFileConfig): Promise<Array<string | Buffer>> {
  const path = agent.caFile ?? join(agent.stateDir, 'ca.pem');
  try {
    return [...rootCertificates, await readFile(path)];
  } catch (err) {
    throw new GateError(
      ErrorCodes.AGENT_STATE,
      `${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}: the agent has not joined yet (its state directory holds the cluster CA once it has); or give --ca`,
      { cause: err },
    );
  }
}

/** The first semantic version in a version command's output (`gate-mux v1.2.4 (git:abc)` → `1.2.4`). */
function versionIn(output: string): string | undefined {
  for (const m of output.matchAll(/v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?/g)) {
    try {
      return formatVersion(parseVersion(m[0]));
    } catch {
      // e.g. 01.2.3: not a version, look further
    }
  }
  return undefined;
}

export async function installedVersion(command: string[], env?: Record<string, string>): Promise<string> {
  const result = await runCommand(command, { timeoutMs: 60_000, ...(env ? { env: { ...process.env, ...env } } : {}) });
  if (result.code !== 0 || result.startError) {
    throw new GateError(
      ErrorCodes.UPGRADE_VERIFY_FAILED,
      `version command ${describeEnd(result)}${result.stderr ? `: ${result.stderr.trim().slice(-200)}` : ''}`,
    );
  }
  // A package database answers with the package version (1.2.4~rc.1): read back as semantic.
  const version = versionIn(versionOfPackage(result.stdout));
  if (!version)
    throw new GateError(
      ErrorCodes.UPGRADE_VERIFY_FAILED,
      `${command.join(' ')} printed no version: ${JSON.stringify(result.stdout.trim().slice(0, 80))}`,
    );
  return version;
}

/**
 * Asks the proxy (version, then critical), reads the schedule, decides, and prints what dry-run
 * prints. Shared by dry-run and run, so both say the same thing.
 */
export async function decide(
  values: DecisionValues,
  log: Logger | undefined,
  run?: { agent: AgentFileConfig | undefined; method: InstallMethod },
): Promise<UpgradeDecision & { critical: boolean }> {
  const { request, agent } = await connection(values, run);
  const method = run?.method;
  const now = values.now ? new Date(values.now) : new Date();
  if (Number.isNaN(now.getTime())) throw new UsageError(`--now: ${JSON.stringify(values.now)} is not a date`);
  const current = formatVersion(parseVersion(values.current ?? (await runningVersion(values, agent, method))));
  const channel = values.channel ?? agent?.updater.channel ?? DEFAULT_UPGRADE_CHANNEL;
  const allowDowngrade = values['allow-downgrade'] || agent?.updater.allowDowngrade === true;
  const rollout = await askRollout(values, agent, request);
  if (rollout) {
    const decision = shouldUpgrade({ current, target: rollout.agentVersion, window: undefined, now, allowDowngrade, rollout });
    if (!decision.available) print(`no upgrades available (${current} == ${decision.target})`);
    else print(`an upgrade is available (${current} -> ${decision.target})`);
    if (rollout.reason) print(rollout.reason);
    if (decision.downgrade) print(`this is a downgrade: the rollout gives ${decision.target}, lower than ${current}`);
    explain(decision);
    log?.info(
      { current, target: decision.target, reason: decision.reason, upgrade: decision.upgrade, rollout: rollout.reason },
      `decided: ${decision.reason}`,
    );
    return { ...decision, critical: false };
  }
  const target = await fetchTargetVersion({ ...request, channel });
  const critical = target === undefined ? false : await criticalOrWarn({ ...request, channel });
  const { schedule, warning } = await readSchedule(schedulePath(values.schedule));
  const decision = shouldUpgrade({ current, target, critical, window: schedule, now, allowDowngrade });

  if (target === undefined) print(`no upgrades available (channel ${channel} offers none)`);
  else if (!decision.available) print(`no upgrades available (${current} == ${decision.target})`);
  else {
    print(`an upgrade is available (${current} -> ${decision.target})`);
    if (decision.downgrade) print(`this is a downgrade: the cluster serves ${decision.target}, lower than ${current}`);
    if (critical) print(`the update is critical: it does not wait for the maintenance window`);
  }
  if (warning) warn(warning);
  if (schedule) {
    const state = maintenanceWindow(schedule, now);
    print(
      state.inWindow
        ? `inside the maintenance window (started ${state.currentStart!.toISOString()})`
        : `next maintenance window starts ${state.nextStart.toISOString()}`,
    );
  }
  explain(decision);
  log?.info(
    {
      current,
      target: target ?? 'none',
      critical,
      reason: decision.reason,
      upgrade: decision.upgrade,
      downgrade: decision.downgrade,
      nextStart: decision.nextStart?.toISOString(),
      channel,
    },
    `decided: ${decision.reason}`,
  );
  return { ...decision, critical };
}

/** The decision's last line: what would be done. */
function explain(decision: UpgradeDecision): void {
  if (decision.reason === 'downgrade-refused')
    print('would not downgrade (--allow-downgrade or updater.allow_downgrade: true follows the cluster down)');
  else if (decision.available) print(decision.upgrade ? `would upgrade now (${decision.reason})` : `would wait (${decision.reason})`);
}

/**
 * The rollout's answer for this agent, when the cluster manages it: asked first for an agent whose
 * name is known (--name, else the file's), by its server ID (the one its description carries) and
 * update group. Undefined (ask the channel) when the name is unknown, when the cluster has no
 * rollout (`managed: false`) and when the proxy does not serve find (404, an older proxy).
 */
async function askRollout(
  values: DecisionValues,
  agent: AgentFileConfig | undefined,
  request: ProxyRequestOptions,
): Promise<Extract<FindAnswer, { managed: true }> | undefined> {
  const name = values.name ?? agent?.name;
  if (name === undefined) return undefined;
  const group = values.group ?? agent?.updater.group ?? DEFAULT_UPDATE_GROUP;
  if (!isValidUpdateGroup(group)) throw new UsageError(`--group: ${JSON.stringify(group)} is not an update group name`);
  const answer = await fetchFind({ ...request, host: serverIdForName(name), group });
  return answer?.managed ? answer : undefined;
}

/**
 * Whether the channel's version is critical. A proxy that does not serve `/critical` (it is not in
 * the platform's document: a proxy may serve only `/version`) answers 404: not critical, said once.
 */
async function criticalOrWarn(options: Parameters<typeof fetchCritical>[0]): Promise<boolean> {
  const critical = await fetchCritical(options);
  if (critical !== undefined) return critical;
  warn(`warning: channel ${options.channel} does not say whether its version is critical (HTTP 404): taken as not critical`);
  return false;
}

/**
 * The version running here: what --version-command prints; else, where the agent's file names a
 * way to install (or the machine has a package manager), what the package database holds; else
 * this program's own version.
 */
async function runningVersion(
  values: DecisionValues,
  agent: AgentFileConfig | undefined,
  method: InstallMethod | undefined,
): Promise<string> {
  if (values['version-command']) return installedVersion(splitCommandLine(values['version-command']));
  const known = method ?? (agent ? installMethodFor(values, agent) : undefined);
  if (known) return installedVersion(known.versionCommands[0]!, known.env);
  return packageVersion;
}

/**
 * How `run` installs and checks: --install-command and --version-command; else the file's
 * install_command (with its version_command, or its package manager's database); else the
 * package manager the file names, or the one the machine has. Undefined when there is none.
 */
export function installMethodFor(
  values: { 'install-command'?: string | undefined; 'version-command'?: string | undefined },
  agent: AgentFileConfig | undefined,
): InstallMethod | undefined {
  const updater = agent?.updater;
  const manager = updater?.packageManager ?? (agent ? detectPackageManager(onPath) : undefined);
  const managed = manager ? packageManagerMethod(manager) : undefined;
  const versionLine = values['version-command'] ?? updater?.versionCommand;
  const versionCommands = versionLine ? [splitCommandLine(versionLine)] : managed?.versionCommands;
  const install = values['install-command'] ?? updater?.installCommand;
  if (install) {
    if (!versionCommands) throw new UsageError('--version-command is required (it confirms the install)');
    return commandMethod(install, versionCommands);
  }
  if (!managed) return undefined;
  return versionLine ? { ...managed, versionCommands: [splitCommandLine(versionLine)] } : managed;
}

/** Whether `program` is an executable file in a PATH folder. */
function onPath(program: string): boolean {
  return (process.env.PATH ?? '/usr/bin:/bin').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, program), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
