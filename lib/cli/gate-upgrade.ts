#!/usr/bin/env node
// gate-upgrade: the updater beside each agent (issue 15). `dry-run` says what it would do, `run`
// does it (inside the maintenance window, or at once for a critical update), `export-schedule`
// writes the cluster's maintenance schedule where both read it.
import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loggerFromOptions } from './log.js';
import { packageVersion } from './package-info.js';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { commandWithVersion, splitCommandLine } from '../upgrade/command-line.js';
import { acquireLock } from '../upgrade/lock.js';
import { maintenanceWindow } from '../upgrade/maintenance-window.js';
import { describeEnd, runCommand } from '../upgrade/run-command.js';
import { fetchSchedule, readSchedule, schedulePath, SCHEDULE_PATH_ENV, DEFAULT_SCHEDULE_PATH } from '../upgrade/schedule.js';
import { writeFileAtomic } from '../upgrade/atomic-write.js';
import { compareVersions, formatVersion, parseVersion } from '../upgrade/semver.js';
import { shouldUpgrade, type UpgradeDecision } from '../upgrade/should-upgrade.js';
import { fetchCritical, fetchTargetVersion, type ProxyRequestOptions } from '../upgrade/target-version.js';

/** Exit codes (README, "Automatic updates"). */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
export const EXIT_DEFERRED = 3;

export const DEFAULT_LOCK_PATH = '/run/gate-upgrade.lock';
const DEFAULT_INSTALL_TIMEOUT_S = 1800;

const CONNECTION_OPTIONS = {
  proxy: { type: 'string' },
  ca: { type: 'string' },
  'server-name': { type: 'string' },
  'insecure-http': { type: 'boolean', default: false },
  schedule: { type: 'string' },
  help: { type: 'boolean', short: 'h', default: false },
} as const satisfies ParseArgsConfig['options'];

const DECISION_OPTIONS = {
  ...CONNECTION_OPTIONS,
  channel: { type: 'string', default: 'default' },
  current: { type: 'string' },
  'version-command': { type: 'string' },
  'no-downgrade': { type: 'boolean', default: false },
  now: { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

const RUN_OPTIONS = {
  ...DECISION_OPTIONS,
  'install-command': { type: 'string' },
  'install-timeout': { type: 'string', default: String(DEFAULT_INSTALL_TIMEOUT_S) },
  lock: { type: 'string', default: DEFAULT_LOCK_PATH },
  'log-level': { type: 'string', default: 'info' },
} as const satisfies ParseArgsConfig['options'];

const CONNECTION_HELP = `  --proxy URL              the proxy's web address, https://host:port (required)
  --ca FILE                CA (PEM) the proxy's certificate must chain to; default: Node's trust store
  --server-name NAME       the name its certificate must carry, when --proxy gives an IP
  --insecure-http          allow an http:// --proxy (refused otherwise: the answers decide what runs)
  --schedule FILE          the exported schedule; default $${SCHEDULE_PATH_ENV}, else ${DEFAULT_SCHEDULE_PATH}`;
const DECISION_HELP = `${CONNECTION_HELP}
  --channel NAME           version channel (default "default"), e.g. stable/cloud
  --current VERSION        the running version; default: what --version-command prints, else this package's
  --version-command CMD    prints the installed version (run without a shell)
  --no-downgrade           refuse a target lower than the running version (default: follow the cluster)
  --now ISO-TIME           decide as if it were then (for trying schedules)`;

const HELP: Record<string, string> = {
  main: `usage: gate-upgrade <command> [options]

  dry-run           say whether an update is available and what the schedule allows; change nothing
  run               the same, then install inside the maintenance window (at once when critical)
  export-schedule   fetch the cluster's maintenance schedule from the proxy and write it

gate-upgrade <command> --help describes each. Requests go through HTTPS_PROXY / NO_PROXY.`,
  'dry-run': `usage: gate-upgrade dry-run --proxy URL [options]

Prints "no upgrades available (a == b)" or "an upgrade is available (a -> b)" (and a second line
when b is lower: a downgrade), then what the schedule allows. Warns on stderr when no valid
schedule has been exported. Exit 0, or 1 on failure (with the error code).

${DECISION_HELP}`,
  run: `usage: gate-upgrade run --proxy URL --install-command CMD --version-command CMD [options]

Decides as dry-run does; when the update is due (inside the maintenance window, or critical) runs
the install command with {version} replaced by the target, then checks that the version command
reports the target. Commands are split into words (quotes and backslashes as in sh) and run without
a shell. Exit 0: nothing to do, or done; 1: failed (or another run holds the lock); 3: deferred to
the maintenance window.

${DECISION_HELP}
  --install-command CMD    e.g. "apt-get install -y gate-mux={version}" (required)
  --install-timeout SEC    give up on the install command after this long (default ${DEFAULT_INSTALL_TIMEOUT_S})
  --lock FILE              lock file keeping runs apart (default ${DEFAULT_LOCK_PATH})
  --log-level LEVEL        log lines on stderr (JSON unless a terminal): info (default), warn, error, silent`,
  'export-schedule': `usage: gate-upgrade export-schedule --proxy URL [options]

Fetches the cluster's maintenance schedule from the proxy and writes it to the schedule file
atomically (a temporary file renamed over it), keeping an existing file's owner and mode.
Exit 0, or 1 on failure (the file is then left as it was).

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

async function connection(values: { proxy?: string | undefined; ca?: string | undefined; 'server-name'?: string | undefined; 'insecure-http'?: boolean | undefined }): Promise<ProxyRequestOptions> {
  if (!values.proxy) throw new UsageError('--proxy is required');
  return {
    proxy: values.proxy,
    ...(values.ca ? { ca: await readCa(values.ca) } : {}),
    ...(values['server-name'] ? { serverName: values['server-name'] } : {}),
    allowHttp: values['insecure-http'] === true,
  };
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

async function installedVersion(command: string): Promise<string> {
  const result = await runCommand(splitCommandLine(command), { timeoutMs: 60_000 });
  if (result.code !== 0 || result.startError) {
    throw new GateError(ErrorCodes.UPGRADE_VERIFY_FAILED, `version command ${describeEnd(result)}${result.stderr ? `: ${result.stderr.trim().slice(-200)}` : ''}`);
  }
  const version = versionIn(result.stdout);
  if (!version) throw new GateError(ErrorCodes.UPGRADE_VERIFY_FAILED, `version command printed no version: ${JSON.stringify(result.stdout.trim().slice(0, 80))}`);
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
async function decide(values: DecisionValues, log: Logger | undefined): Promise<UpgradeDecision & { critical: boolean }> {
  const request = await connection(values);
  const now = values.now ? new Date(values.now) : new Date();
  if (Number.isNaN(now.getTime())) throw new UsageError(`--now: ${JSON.stringify(values.now)} is not a date`);
  const current = formatVersion(parseVersion(values.current ?? (values['version-command'] ? await installedVersion(values['version-command']) : packageVersion)));
  const channel = values.channel ?? 'default';
  const target = await fetchTargetVersion({ ...request, channel });
  const critical = target === undefined ? false : await fetchCritical({ ...request, channel });
  const { schedule, warning } = await readSchedule(schedulePath(values.schedule));
  const decision = shouldUpgrade({ current, target, critical, window: schedule, now, allowDowngrade: !values['no-downgrade'] });

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
    print(state.inWindow ? `inside the maintenance window (started ${state.currentStart!.toISOString()})` : `next maintenance window starts ${state.nextStart.toISOString()}`);
  }
  if (decision.reason === 'downgrade-refused') print('would not downgrade (--no-downgrade)');
  else if (decision.available) print(decision.upgrade ? `would upgrade now (${decision.reason})` : `would wait (${decision.reason})`);
  log?.info(
    { current, target: target ?? 'none', critical, reason: decision.reason, upgrade: decision.upgrade, downgrade: decision.downgrade, nextStart: decision.nextStart?.toISOString(), channel },
    `decided: ${decision.reason}`,
  );
  return { ...decision, critical };
}

async function dryRun(argv: string[]): Promise<number> {
  const values = parseDecision(argv);
  if (values.help) return help('dry-run');
  await decide(values, undefined);
  return EXIT_OK;
}

function installTimeoutMs(text: string): number {
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new UsageError(`--install-timeout: ${JSON.stringify(text)} is not a number of seconds`);
  return seconds * 1000;
}

async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: RUN_OPTIONS, strict: true, allowPositionals: false });
  if (values.help) return help('run');
  if (!values['install-command']) throw new UsageError('--install-command is required');
  if (!values['version-command']) throw new UsageError('--version-command is required (it confirms the install)');
  const install = values['install-command'];
  const versionCommand = values['version-command'];
  const timeoutMs = installTimeoutMs(values['install-timeout']);
  splitCommandLine(install); // a broken command line is a usage error before anything is asked
  // To stderr (stdout is for the decision): readable on a terminal, JSON lines otherwise.
  const logger = loggerFromOptions(values['log-level']!, undefined, 2);
  if (logger instanceof Error) throw new UsageError(logger.message);
  const log = componentLogger(logger, 'gate-upgrade');

  const lock = await acquireLock(values.lock);
  try {
    const decision = await decide(values, log);
    if (!decision.upgrade) {
      if (decision.reason === 'outside-window' || decision.reason === 'no-schedule') {
        log.info({ reason: decision.reason, nextStart: decision.nextStart?.toISOString() }, 'deferred to the maintenance window');
        return EXIT_DEFERRED;
      }
      return EXIT_OK;
    }
    const target = decision.target!;
    const argvOfInstall = commandWithVersion(install, target);
    print(`installing ${target} (${decision.reason})`);
    log.info({ argv: argvOfInstall, reason: decision.reason }, `installing ${target}`);
    const result = await runCommand(argvOfInstall, { timeoutMs });
    if (result.code !== 0 || result.startError) {
      const err = new GateError(ErrorCodes.UPGRADE_INSTALL_FAILED, `install command ${describeEnd(result)}`);
      log.error({ err, stderr: result.stderr.slice(-2000), stdout: result.stdout.slice(-2000) }, 'install failed');
      throw err;
    }
    const installed = await installedVersion(versionCommand);
    if (compareVersions(installed, target) !== 0) {
      const err = new GateError(ErrorCodes.UPGRADE_VERIFY_FAILED, `after the install the version command reports ${installed}, not ${target}`);
      log.error({ err, installed, target }, 'version check failed');
      throw err;
    }
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
  const request = await connection(values);
  const path = schedulePath(values.schedule);
  const { text } = await fetchSchedule(request);
  const { changed } = await writeFileAtomic(path, text);
  print(changed ? `wrote the maintenance schedule to ${path}` : `the maintenance schedule in ${path} is up to date`);
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
    if (err instanceof UsageError || code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' || code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      warn(`gate-upgrade ${command}: ${(err as Error).message} (see gate-upgrade ${command} --help)`);
      return EXIT_USAGE;
    }
    warn(`gate-upgrade ${command}: ${code ?? 'error'}: ${(err as Error).message}`);
    return EXIT_FAILED;
  }
}

// realpath: npm installs the bin as a symlink, and import.meta.url names the file it points to.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) process.exitCode = await main(process.argv.slice(2));
