// gate-upgrade's command line: the exit codes, each command's options and --help text, and the
// checks of option values. Kept apart from what the commands do, so that the words a user reads
// (and docs/updates.md documents) are in one place.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { DEFAULT_AGENT_CONFIG_PATH } from '../config/agent-config.js';
import { SCHEDULE_PATH_ENV, DEFAULT_SCHEDULE_PATH } from '../updater/schedule.js';

/** Exit codes (docs/updates.md). */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
export const EXIT_DEFERRED = 3;

export const DEFAULT_LOCK_PATH = '/run/gate-upgrade.lock';
const DEFAULT_INSTALL_TIMEOUT_S = 1800;
export const DEFAULT_HEALTH_TIMEOUT_S = 120;

export const CONNECTION_OPTIONS = {
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

export const RUN_OPTIONS = {
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

export const HELP: Record<string, string> = {
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

export class UsageError extends Error {}

export function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

export function warn(line: string): void {
  process.stderr.write(`${line}\n`);
}

export type DecisionValues = ReturnType<typeof parseDecision>;
export function parseDecision(argv: string[]) {
  return parseArgs({ args: argv, options: DECISION_OPTIONS, strict: true, allowPositionals: false }).values;
}

export function secondsMs(flag: string, text: string, zeroAllowed = false): number {
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 0 || (seconds === 0 && !zeroAllowed))
    throw new UsageError(`${flag}: ${JSON.stringify(text)} is not a number of seconds`);
  return seconds * 1000;
}

export function help(topic: string): number {
  print(HELP[topic]!);
  return EXIT_OK;
}
