#!/usr/bin/env node
// gate-upgrade: the updater beside each agent. `dry-run` says what it would do, `run`
// does it (inside the maintenance window, or at once for a critical update), `export-schedule`
// writes the cluster's maintenance schedule where both read it.
import { accessSync, constants, realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { pathToFileURL } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loggerFromOptions } from './log.js';
import { packageVersion } from './package-info.js';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { DEFAULT_AGENT_CONFIG_PATH, DEFAULT_UPGRADE_CHANNEL, loadAgentConfig, type AgentFileConfig } from '../config/agent-config.js';
import { splitCommandLine } from '../updater/command-line.js';
import {
  commandMethod,
  detectPackageManager,
  packageManagerMethod,
  versionOfPackage,
  type InstallMethod,
} from '../updater/install-method.js';
import { acquireLock } from '../updater/lock.js';
import { maintenanceWindow } from '../updater/maintenance-window.js';
import { describeEnd, runCommand } from '../updater/run-command.js';
import { fetchSchedule, readSchedule, schedulePath, SCHEDULE_PATH_ENV, DEFAULT_SCHEDULE_PATH } from '../updater/schedule.js';
import { writeFileAtomic } from '../updater/atomic-write.js';
import { sealSchedule } from '../updater/schedule-seal.js';
import { compareVersions, formatVersion, parseVersion } from '../vocabulary/semver.js';
import { shouldUpgrade, type UpgradeDecision } from '../updater/should-upgrade.js';
import { fetchCritical, fetchTargetVersion, type ProxyRequestOptions } from '../updater/target-version.js';
import { fetchFind, type FindAnswer } from '../updater/find.js';
import { readReadiness, waitReady } from '../updater/agent-readiness.js';
import { writeLastUpdate, type LastUpdate } from '../updater/last-update.js';
import { serverIdForName } from '../tunnel/server-id.js';
import { DEFAULT_UPDATE_GROUP, isValidUpdateGroup } from '../wire/names.js';

/** Exit codes (docs/updates.md). */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
export const EXIT_DEFERRED = 3;

export const DEFAULT_LOCK_PATH = '/run/gate-upgrade.lock';
const DEFAULT_INSTALL_TIMEOUT_S = 1800;
const DEFAULT_HEALTH_TIMEOUT_S = 120;

const CONNECTION_OPTIONS = {
  config: { type: 'string' },
  proxy: { type: 'string' },
  ca: { type: 'string' },
  'server-name': { type: 'string' },
  'insecure-http': { type: 'boolean', default: false },
  schedule: { type: 'string' },
  help: { type: 'boolean', short: 'h', default: false },
} as const satisfies ParseArgsConfig['options'];

const DECISION_OPTIONS = {
  ...CONNECTION_OPTIONS,
  channel: { type: 'string' },
  current: { type: 'string' },
  'version-command': { type: 'string' },
  'allow-downgrade': { type: 'boolean', default: false },
  now: { type: 'string' },
  name: { type: 'string' },
  group: { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

const RUN_OPTIONS = {
  ...DECISION_OPTIONS,
  'install-command': { type: 'string' },
  'install-timeout': { type: 'string', default: String(DEFAULT_INSTALL_TIMEOUT_S) },
  lock: { type: 'string', default: DEFAULT_LOCK_PATH },
  'state-dir': { type: 'string' },
  'health-timeout': { type: 'string' },
  'log-level': { type: 'string', default: 'info' },
} as const satisfies ParseArgsConfig['options'];

const CONNECTION_HELP = `  --config FILE            the agent's configuration file (default ${DEFAULT_AGENT_CONFIG_PATH}, read
                           when --proxy is not given): its proxy, the cluster CA in its state_dir,
                           updater.channel and how to install (updater.package_manager ...)
  --proxy URL              the proxy's web address, https://host:port (instead of the file's)
  --ca FILE                CA (PEM) the proxy's certificate must chain to; default: the file's
                           cluster CA and Node's trust store, or Node's trust store alone
  --server-name NAME       the name its certificate must carry, when --proxy gives an IP
  --insecure-http          allow an http:// --proxy (refused otherwise: the answers decide what runs)
  --schedule FILE          the exported schedule; default $${SCHEDULE_PATH_ENV}, else ${DEFAULT_SCHEDULE_PATH}`;
const DECISION_HELP = `${CONNECTION_HELP}
  --channel NAME           version channel (default: the file's updater.channel, else "default")
  --current VERSION        the running version; default: what --version-command prints, else the
                           installed package's (the file's package manager), else this program's
  --version-command CMD    prints the installed version (run without a shell)
  --allow-downgrade        install a target lower than the running version too (default: refused,
                           critical or not; the file's updater.allow_downgrade: true does the same)
  --now ISO-TIME           decide as if it were then (for trying schedules)
  --name NAME              the agent's name (default: the file's name): with it the proxy's rollout
                           is asked first (/v1/webapi/find, by the agent's server ID)
  --group NAME             the agent's update group (default: the file's updater.group, else "default")`;

const HELP: Record<string, string> = {
  main: `usage: gate-upgrade <command> [options]

  dry-run           say whether an update is available and what the schedule allows; change nothing
  run               the same, then install inside the maintenance window (at once when critical)
  export-schedule   fetch the cluster's maintenance schedule from the proxy and write it

gate-upgrade <command> --help describes each. Requests to the proxy go through HTTPS_PROXY, else
HTTP_PROXY (NO_PROXY excepted), as the agent's do.`,
  'dry-run': `usage: gate-upgrade dry-run [options]

Prints "no upgrades available (a == b)" or "an upgrade is available (a -> b)" (and a second line
when b is lower: a downgrade), then what the schedule allows. When the cluster runs a rollout
(asked first, for an agent whose name is known) its version is the target, the rollout decides
when, and its reason is the second line. Warns on stderr when no valid
schedule has been exported. Exit 0, or 1 on failure (with the error code).

${DECISION_HELP}`,
  run: `usage: gate-upgrade run [options]

Decides as dry-run does; when the update is due (inside the maintenance window, or critical)
installs gate-mux at the target version through the package manager (apt, dnf, yum or zypper:
the file's updater.package_manager, else the one this machine has), then checks that the package
database and \`gate-mux --version\` both report the target. An install command (flag or the
file's updater.install_command) replaces the package manager; {version} is the target. Commands are split into words (quotes and backslashes as in sh) and run without
a shell. Exit 0: nothing to do, or done; 1: failed (or another run holds the lock); 3: deferred to
the maintenance window (or the rollout has not reached this agent). After an install the agent
must report the new version with a tunnel up (--health-timeout); if it does not, the version it
had is reinstalled and the run fails (GATE_ERR_UPGRADE_UNHEALTHY).

${DECISION_HELP}
  --install-command CMD    e.g. "apt-get install -y gate-mux={version}" (needs --version-command)
  --install-timeout SEC    give up on the install command after this long (default ${DEFAULT_INSTALL_TIMEOUT_S})
  --lock FILE              lock file keeping runs apart (default ${DEFAULT_LOCK_PATH})
  --state-dir DIR          the agent's state directory (default: the file's state_dir): where the
                           agent reports readiness (ready.json) and the updater its outcome
                           (last-update.json)
  --health-timeout SEC     after an install, how long the agent has to report the new version with a
                           tunnel up before the old version is reinstalled (default ${DEFAULT_HEALTH_TIMEOUT_S}; checked
                           when the agent has written ready.json in its state directory, or when given)
  --log-level LEVEL        log lines on stderr (JSON unless a terminal): info (default), warn, error, silent`,
  'export-schedule': `usage: gate-upgrade export-schedule [options]

Fetches the cluster's maintenance schedule from the proxy and writes it to the schedule file,
keeping an existing file's owner and mode: atomically (a temporary file renamed over it) where
the directory lets this user create files, else rewritten in place (a reader takes a torn file
for no valid schedule, never for another window). Run as a non-root agent's user, that user must
own the file. Exit 0, or 1 on failure (the file is then left as it was).

${CONNECTION_HELP}`,
};

class UsageError extends Error {}

function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

function warn(line: string): void {
  process.stderr.write(`${line}\n`);
}

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
async function agentConfigFor(values: ConnectionValues): Promise<AgentFileConfig | undefined> {
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
async function connection(
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

async function installedVersion(command: string[], env?: Record<string, string>): Promise<string> {
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

type DecisionValues = ReturnType<typeof parseDecision>;
function parseDecision(argv: string[]) {
  return parseArgs({ args: argv, options: DECISION_OPTIONS, strict: true, allowPositionals: false }).values;
}

/**
 * Asks the proxy (version, then critical), reads the schedule, decides, and prints what dry-run
 * prints. Shared by dry-run and run, so both say the same thing.
 */
async function decide(
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
function installMethodFor(
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

async function dryRun(argv: string[]): Promise<number> {
  const values = parseDecision(argv);
  if (values.help) return help('dry-run');
  await decide(values, undefined);
  return EXIT_OK;
}

function secondsMs(flag: string, text: string, zeroAllowed = false): number {
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 0 || (seconds === 0 && !zeroAllowed))
    throw new UsageError(`${flag}: ${JSON.stringify(text)} is not a number of seconds`);
  return seconds * 1000;
}

/** Runs the method's install commands for `version` (one deadline for all), then checks each version command reports it. */
async function installVersion(method: InstallMethod, version: string, deadline: number, reason: string, log: Logger): Promise<void> {
  const env = { ...process.env, ...method.env };
  for (const argvOfInstall of method.install(version)) {
    log.info({ argv: argvOfInstall, reason, method: method.name }, `installing ${version}`);
    const result = await runCommand(argvOfInstall, { timeoutMs: Math.max(1, deadline - Date.now()), env });
    if (result.code !== 0 || result.startError) {
      const err = new GateError(
        ErrorCodes.UPGRADE_INSTALL_FAILED,
        `${method.name === 'install command' ? 'install command' : argvOfInstall.join(' ')} ${describeEnd(result)}`,
      );
      log.error({ err, stderr: result.stderr.slice(-2000), stdout: result.stdout.slice(-2000) }, 'install failed');
      throw err;
    }
  }
  for (const command of method.versionCommands) {
    const installed = await installedVersion(command, method.env);
    if (compareVersions(installed, version) !== 0) {
      const err = new GateError(
        ErrorCodes.UPGRADE_VERIFY_FAILED,
        `after the install ${command.join(' ')} reports ${installed}, not ${version}`,
      );
      log.error({ err, installed, target: version }, 'version check failed');
      throw err;
    }
  }
}

/**
 * The new version did not come back ready: reinstall the one the agent had (the same method; a
 * revert is a downgrade that needs no permission, it restores what ran before), check it the same
 * way, record the outcome for the cluster, and fail with GATE_ERR_UPGRADE_UNHEALTHY either way.
 * The record is written before the reinstall too, so the old agent, starting, already reports it.
 */
async function revert(o: {
  method: InstallMethod;
  stateDir: string;
  from: string;
  to: string;
  why: string;
  timeoutMs: number;
  healthTimeoutMs: number;
  log: Logger;
}): Promise<never> {
  const { from, to, why, log } = o;
  print(`the agent is not ready on ${to} (${why}): reinstalling ${from}`);
  log.error({ from, to, why }, 'unhealthy after the install: reverting');
  const record: LastUpdate = { from, to, outcome: 'reverted', reason: `not ready on ${to}: ${why}`, at: '' };
  await recordOutcome(o.stateDir, record, log);
  let revertFailure: string | undefined;
  try {
    await installVersion(o.method, from, Date.now() + o.timeoutMs, 'revert', log);
    revertFailure = await waitReady(o.stateDir, from, { timeoutMs: o.healthTimeoutMs });
  } catch (err) {
    revertFailure = `${(err as { code?: string }).code ?? 'error'}: ${(err as Error).message}`;
  }
  if (revertFailure === undefined) print(`reverted to ${from}: the agent is ready`);
  else {
    print(`the revert to ${from} did not come back ready either (${revertFailure})`);
    await recordOutcome(o.stateDir, { ...record, reason: `${record.reason}; the revert to ${from} failed too: ${revertFailure}` }, log);
  }
  throw new GateError(
    ErrorCodes.UPGRADE_UNHEALTHY,
    `the agent was not ready on ${to} (${why}); ${revertFailure === undefined ? `reverted to ${from}` : `the revert to ${from} failed too (${revertFailure})`}`,
  );
}

/** Writes last-update.json for the agent to report; a failure to write is logged, not fatal (the install stands). */
async function recordOutcome(stateDir: string, update: LastUpdate, log: Logger): Promise<void> {
  try {
    await writeLastUpdate(stateDir, { ...update, at: new Date().toISOString() });
  } catch (err) {
    log.warn({ err, stateDir }, 'could not record the update outcome in the state directory');
  }
}

async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: RUN_OPTIONS, strict: true, allowPositionals: false });
  if (values.help) return help('run');
  const agent = await agentConfigFor(values);
  const method = installMethodFor(values, agent);
  if (!method)
    throw new UsageError(
      'no way to install: give --install-command and --version-command, or updater.package_manager in the agent configuration file',
    );
  const timeoutMs = secondsMs('--install-timeout', values['install-timeout']!);
  // To stderr (stdout is for the decision): readable on a terminal, JSON lines otherwise.
  const logger = loggerFromOptions(values['log-level']!, undefined, 2);
  if (logger instanceof Error) throw new UsageError(logger.message);
  const log = componentLogger(logger, 'gate-upgrade');

  const lock = await acquireLock(values.lock);
  try {
    const decision = await decide(values, log, { agent, method });
    if (!decision.upgrade) {
      if (decision.reason === 'outside-window' || decision.reason === 'no-schedule' || decision.reason === 'rollout-wait') {
        log.info({ reason: decision.reason, nextStart: decision.nextStart?.toISOString() }, 'deferred to the maintenance window');
        return EXIT_DEFERRED;
      }
      return EXIT_OK;
    }
    const target = decision.target!;
    const stateDir = values['state-dir'] ?? agent?.stateDir;
    // The health check needs an agent that reports readiness: one that has written ready.json
    // here before (this build of the agent does, at every tunnel change), or the flag insisting.
    const healthTimeoutMs =
      values['health-timeout'] !== undefined
        ? secondsMs('--health-timeout', values['health-timeout'], true)
        : stateDir !== undefined && (await readReadiness(stateDir)) !== undefined
          ? DEFAULT_HEALTH_TIMEOUT_S * 1000
          : 0;
    if (healthTimeoutMs > 0 && stateDir === undefined)
      throw new UsageError("--health-timeout needs the agent state directory (--state-dir, or the file's state_dir)");
    print(`installing ${target} (${decision.reason})`);
    await installVersion(method, target, Date.now() + timeoutMs, decision.reason, log);
    if (healthTimeoutMs > 0 && stateDir !== undefined) {
      const why = await waitReady(stateDir, target, { timeoutMs: healthTimeoutMs });
      if (why !== undefined) {
        await revert({ method, stateDir, from: decision.current, to: target, why, timeoutMs, healthTimeoutMs, log });
      }
      print(`the agent is ready on ${target}`);
    }
    if (stateDir !== undefined)
      await recordOutcome(
        stateDir,
        {
          from: decision.current,
          to: target,
          outcome: 'installed',
          reason: healthTimeoutMs > 0 ? 'ready' : 'readiness not checked',
          at: '',
        },
        log,
      );
    print(`upgraded ${decision.current} -> ${target}`);
    log.info({ from: decision.current, to: target }, 'upgraded');
    return EXIT_OK;
  } finally {
    await lock.release();
  }
}

async function exportSchedule(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: CONNECTION_OPTIONS, strict: true, allowPositionals: false });
  if (values.help) return help('export-schedule');
  const { request } = await connection(values);
  const path = schedulePath(values.schedule);
  const { text } = await fetchSchedule(request);
  const { changed, inPlace } = await writeFileAtomic(path, sealSchedule(text), { inPlaceWhenDirectoryDenies: true });
  print(
    changed
      ? `wrote the maintenance schedule to ${path}${inPlace ? ' (in place: this user may not create files in its directory)' : ''}`
      : `the maintenance schedule in ${path} is up to date`,
  );
  return EXIT_OK;
}

function help(topic: string): number {
  print(HELP[topic]!);
  return EXIT_OK;
}

const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  'dry-run': dryRun,
  run,
  'export-schedule': exportSchedule,
};

/** `gate-upgrade <command> [options]`; returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    print(HELP.main!);
    return command === undefined ? EXIT_USAGE : EXIT_OK;
  }
  const handler = COMMANDS[command];
  if (!handler) {
    warn(`gate-upgrade: unknown command ${JSON.stringify(command)}\n${HELP.main}`);
    return EXIT_USAGE;
  }
  try {
    return await handler(rest);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (
      err instanceof UsageError ||
      code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ||
      code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' ||
      code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL'
    ) {
      warn(`gate-upgrade ${command}: ${(err as Error).message} (see gate-upgrade ${command} --help)`);
      return EXIT_USAGE;
    }
    warn(`gate-upgrade ${command}: ${code ?? 'error'}: ${(err as Error).message}`);
    return EXIT_FAILED;
  }
}

// realpath: npm installs the bin as a symlink, and import.meta.url names the file it points to.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href)
  process.exitCode = await main(process.argv.slice(2));
