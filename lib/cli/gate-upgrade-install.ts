// `gate-upgrade run`'s change to the host: install a version and check every version command
// reports it, put the previous one back when the install or the agent's health check fails, and
// record the outcome where the agent reports it from (last-update.json).
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import type { InstallMethod } from '../updater/install-method.js';
import { describeEnd, runCommand } from '../updater/run-command.js';
import { compareVersions } from '../vocabulary/semver.js';
import { waitReady } from '../updater/agent-readiness.js';
import { writeLastUpdate, type LastUpdate } from '../updater/last-update.js';
import { print } from './gate-upgrade-usage.js';
import { installedVersion } from './gate-upgrade-decide.js';

/** Runs the method's install commands for `version` (one deadline for all), then checks each version command reports it. */
export async function installVersion(method: InstallMethod, version: string, deadline: number, reason: string, log: Logger): Promise<void> {
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
export async function revert(o: {
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
export async function recordOutcome(stateDir: string, update: LastUpdate, log: Logger): Promise<void> {
  try {
    await writeLastUpdate(stateDir, { ...update, at: new Date().toISOString() });
  } catch (err) {
    log.warn({ err, stateDir }, 'could not record the update outcome in the state directory');
  }
}
