// Runs a systemd unit's commands the way systemd would, without systemd: Environment= then the
// EnvironmentFile's NAME=value lines (which win), `$VAR` as a word expanded to zero or more words
// and `${VAR}` inside a word, quotes as systemd reads them. Installed paths are swapped for the
// test's (the program, the configuration, the pid file) by a word-for-words table.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Teardownable } from './daemon.js';

export type Unit = Map<string, Array<[string, string]>>;

/** Sections of a unit file, each a list of key/value pairs in file order (keys may repeat). */
export function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Array<[string, string]> | undefined;
  const lines = text.replace(/\\\n/g, ' ').split('\n');
  for (const raw of lines) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = [];
      unit.set(header[1]!, section);
      continue;
    }
    const eq = line.indexOf('=');
    if (eq < 0 || !section) throw new Error(`not a unit line: ${line}`);
    section.push([line.slice(0, eq).trim(), line.slice(eq + 1).trim()]);
  }
  return unit;
}

export function readUnit(path: string): Unit {
  return parseUnit(readFileSync(path, 'utf8'));
}

/** Every value of `key` in `section`. */
export function unitValues(unit: Unit, section: string, key: string): string[] {
  return (unit.get(section) ?? []).filter(([k]) => k === key).map(([, v]) => v);
}

/** The one value of `key` (the last wins, as in systemd), or undefined. */
export function unitValue(unit: Unit, section: string, key: string): string | undefined {
  return unitValues(unit, section, key).at(-1);
}

/** NAME=value lines of an environment file (comments, blank lines and surrounding quotes dropped). */
export function parseEnvironmentFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!m) continue;
    const value = m[2]!.trim();
    env[m[1]!] = /^(["']).*\1$/.test(value) ? value.slice(1, -1) : value;
  }
  return env;
}

/** Words of a command line with systemd's quoting ('...' and "..." group; a backslash escapes). */
function words(line: string): Array<{ text: string; quoted: boolean }> {
  const out: Array<{ text: string; quoted: boolean }> = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|((?:[^\s"'\\]|\\.)+)/g;
  for (const m of line.matchAll(re)) {
    if (m[1] !== undefined) out.push({ text: m[1].replace(/\\(.)/g, '$1'), quoted: true });
    else if (m[2] !== undefined) out.push({ text: m[2], quoted: true });
    else out.push({ text: m[3]!.replace(/\\(.)/g, '$1'), quoted: false });
  }
  return out;
}

/**
 * An Exec*= line as the argv systemd would run: a leading `-` (failure ignored) dropped, `$$` a
 * literal `$`, a whole unquoted word `$VAR` split at blanks (zero words when empty or unset),
 * `${VAR}` substituted inside a word, then each word looked up in `replace`.
 */
export function execArgv(line: string, env: Record<string, string | undefined>, replace: Record<string, string[]> = {}): string[] {
  const argv: string[] = [];
  for (const { text, quoted } of words(line.replace(/^[-@:+!]+/, ''))) {
    const whole = /^\$([A-Za-z_][A-Za-z0-9_]*)$/.exec(text);
    const expanded =
      whole && !quoted
        ? (env[whole[1]!] ?? '').split(/\s+/).filter(Boolean)
        : [text.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_all, name: string | undefined) => (name ? (env[name] ?? '') : '$'))];
    for (const word of expanded) argv.push(...(replace[word] ?? [word]));
  }
  return argv;
}

export interface UnitEnvironmentOptions {
  /** What the unit's environment starts from (systemd's is nearly empty; a test passes PATH and tap's). */
  base?: Record<string, string | undefined>;
  /** Where the unit's EnvironmentFile= paths are read from instead (installed path → test path). */
  files?: Record<string, string>;
}

/** The environment systemd gives the unit's commands: base, Environment=, then EnvironmentFile= lines. */
export function unitEnvironment(unit: Unit, options: UnitEnvironmentOptions = {}): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...options.base };
  for (const assignment of unitValues(unit, 'Service', 'Environment')) {
    for (const { text } of words(assignment)) {
      const eq = text.indexOf('=');
      if (eq > 0) env[text.slice(0, eq)] = text.slice(eq + 1);
    }
  }
  for (const spec of unitValues(unit, 'Service', 'EnvironmentFile')) {
    const optional = spec.startsWith('-');
    const path = spec.replace(/^-/, '');
    let text: string;
    try {
      text = readFileSync(options.files?.[path] ?? path, 'utf8');
    } catch (err) {
      if (optional && (err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    Object.assign(env, parseEnvironmentFile(text));
  }
  return env;
}

export interface RunningUnitCommand {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Starts one Exec*= line of a unit (argv from `execArgv`); killed at teardown if still running. */
export function startUnitCommand(
  t: Teardownable,
  line: string,
  env: Record<string, string | undefined>,
  replace: Record<string, string[]>,
): RunningUnitCommand {
  const [command, ...args] = execArgv(line, env, replace);
  const child = spawn(command!, args, { env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  return { child, output: () => output, exited };
}
