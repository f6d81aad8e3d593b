#!/usr/bin/env node
// gate-upgrade: the updater beside each agent. `dry-run` says what it would do, `run`
// does it (inside the maintenance window, or at once for a critical update), `export-schedule`
// writes the cluster's maintenance schedule where both read it. This file is the commands and the
// entry point; gate-upgrade-usage.ts the options and help, gate-upgrade-decide.ts what both
// dry-run and run decide, gate-upgrade-install.ts the install, its check and the revert.
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loggerFromOptions } from './log.js';
import { componentLogger } from '../log.js';
import { acquireLock } from '../updater/lock.js';
import { fetchSchedule, schedulePath } from '../updater/schedule.js';
import { writeFileAtomic } from '../updater/atomic-write.js';
import { sealSchedule } from '../updater/schedule-seal.js';
import { readReadiness, waitReady } from '../updater/agent-readiness.js';
import {
  CONNECTION_OPTIONS,
  DEFAULT_HEALTH_TIMEOUT_S,
  EXIT_DEFERRED,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_USAGE,
  HELP,
  RUN_OPTIONS,
  UsageError,
  help,
  parseDecision,
  print,
  secondsMs,
  warn,
} from './gate-upgrade-usage.js';

export { EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DEFERRED, DEFAULT_LOCK_PATH } from './gate-upgrade-usage.js';
import { installVersion, recordOutcome, revert } from './gate-upgrade-install.js';
import { agentConfigFor, connection, decide, installMethodFor } from './gate-upgrade-decide.js';

async function dryRun(argv: string[]): Promise<number> {
  const values = parseDecision(argv);
  if (values.help) return help('dry-run');
  await decide(values, undefined);
  return EXIT_OK;
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
