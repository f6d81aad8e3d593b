import type { PackageManager } from '../config/agent-config.js';
import { commandWithVersion, splitCommandLine } from './command-line.js';

/** The package gate-upgrade installs and asks about. */
export const PACKAGE_NAME = 'gate-mux';

/**
 * How the updater installs a version and reads what is installed: commands run one after the
 * other without a shell, then the installed version read back (the package database and, as a
 * second witness, the program itself). Pure: it only builds argv lists.
 */
export interface InstallMethod {
  /** Where it came from, for log lines: `apt`, `install_command`, ... */
  name: string;
  /** The commands that install `version` (a semantic version, as the channel serves it). */
  install(version: string): string[][];
  /** Each prints the installed version; every one must report the target after an install. */
  versionCommands: string[][];
  /** Environment for the commands (a package manager must never stop to ask). */
  env: Record<string, string>;
}

/**
 * A semantic version as a Debian or RPM package version: a pre-release's `-` becomes `~`, which
 * both sort before the release (1.2.4~rc.1 < 1.2.4), as semantic versions do; `-` would be read
 * as a Debian revision, and RPM refuses it in a version.
 */
export function packageVersionOf(version: string): string {
  return version.replace('-', '~');
}

/** The reverse: a package version back to the semantic version it was made from. */
export function versionOfPackage(packageVersion: string): string {
  return packageVersion.replace('~', '-');
}

/** The program every install is checked with, besides the package database. */
const PROGRAM_VERSION = [PACKAGE_NAME, '--version'];

/** The install commands of each package manager the platform supports (apt, yum/dnf, zypper). */
export function packageManagerMethod(manager: PackageManager): InstallMethod {
  switch (manager) {
    case 'apt':
      return {
        name: 'apt',
        install: (v) => [
          // The new version is found only in fresh package lists.
          ['apt-get', 'update', '-q'],
          // --allow-downgrades: the cluster may move a channel back (docs/updates.md).
          // confdef/confold: a conffile the operator edited (/etc/default/gate) is kept, never asked about.
          [
            'apt-get',
            'install',
            '-y',
            '-q',
            '--allow-downgrades',
            '-o',
            'Dpkg::Options::=--force-confdef',
            '-o',
            'Dpkg::Options::=--force-confold',
            `${PACKAGE_NAME}=${packageVersionOf(v)}`,
          ],
        ],
        versionCommands: [['dpkg-query', '-W', '-f=${Version}', PACKAGE_NAME], PROGRAM_VERSION],
        env: { DEBIAN_FRONTEND: 'noninteractive' },
      };
    case 'dnf':
    case 'yum':
      return {
        name: manager,
        // install of a lower NEVRA downgrades in dnf; --refresh reads fresh metadata first.
        install: (v) => [[manager, 'install', '-y', '--refresh', `${PACKAGE_NAME}-${packageVersionOf(v)}`]],
        versionCommands: [['rpm', '-q', '--qf', '%{VERSION}', PACKAGE_NAME], PROGRAM_VERSION],
        env: {},
      };
    case 'zypper':
      return {
        name: 'zypper',
        install: (v) => [
          ['zypper', '--non-interactive', 'refresh'],
          ['zypper', '--non-interactive', 'install', '--oldpackage', `${PACKAGE_NAME}=${packageVersionOf(v)}`],
        ],
        versionCommands: [['rpm', '-q', '--qf', '%{VERSION}', PACKAGE_NAME], PROGRAM_VERSION],
        env: {},
      };
  }
}

/** Which package manager this machine has: the first of apt (dpkg-query), dnf, yum, zypper found by `has`. */
export function detectPackageManager(has: (program: string) => boolean): PackageManager | undefined {
  if (has('apt-get') && has('dpkg-query')) return 'apt';
  if (has('dnf')) return 'dnf';
  if (has('yum')) return 'yum';
  if (has('zypper')) return 'zypper';
  return undefined;
}

/**
 * An operator's own command lines (split as `splitCommandLine` does, run without a shell):
 * `install` with `{version}`, and the commands that print what is installed.
 */
export function commandMethod(install: string, versionCommands: string[][]): InstallMethod {
  splitCommandLine(install); // a broken command line is a usage error before anything is asked
  return { name: 'install command', install: (v) => [commandWithVersion(install, v)], versionCommands, env: {} };
}
