// A booted Debian 12 for the system tests (test/system/): a minimal root made by mmdebstrap from
// Debian's packages, with systemd as PID 1 under systemd-nspawn, its own loopback and no other
// network (--private-network), and no Node.js. Commands run inside it through nsenter, as root,
// with a clean environment.
//
// The root is made once per CI run and reused: a tarball in GATE_MUX_SYSTEM_CACHE (.ci/run makes
// that directory and removes it at the end), else in the test's own temp dir. Each boot unpacks
// its own copy, so tests never see each other's changes; teardown powers the container off (then
// kills it if it is still up after 30 s) and removes the copy.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Teardownable } from './daemon.js';
import { run, until } from './net.js';
import { ranOnceThisCiRun } from './once-per-ci-run.js';
import { isRoot } from './system-user.js';
import { tempDir } from './temp-dir.js';

/**
 * What every root holds besides Debian's minbase: systemd, curl for the operator's requests, and
 * procps, which gate-mux depends on (/bin/kill, for ExecReload): every Debian install but minbase
 * has it, and the container cannot reach Debian's mirrors for apt to fetch it.
 */
const BASE_PACKAGES = ['systemd', 'systemd-sysv', 'dbus', 'ca-certificates', 'curl', 'procps'];
const PATH = '/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Why a system test (it builds a Debian root and boots it) does not run here, or false when it
 * does: only where CI=true, once per CI run (.ci/test-nodes sets GATE_MUX_MACHINE_TESTS=done for
 * the other Node majors). CI runs as root: there, not being root is a failure, not a skip.
 */
export function systemTestSkip(): string | false {
  if (process.env.CI !== 'true') return 'builds a Debian root and boots it in a container: runs only where CI=true';
  const once = ranOnceThisCiRun('the system test is not repeated per Node major');
  if (once) return once;
  if (!isRoot()) throw new Error('CI=true but not root: the system tests need root (mmdebstrap, systemd-nspawn)');
  return false;
}

export interface Booted {
  /** The container's root directory, as seen from the host (write files into it from here). */
  readonly root: string;
  /** The host pid of the container's systemd (PID 1 inside). */
  readonly pid: number;
  /** Runs `sh -c command` inside, as root with a clean environment; never throws on a non-zero exit. */
  exec(command: string, options?: { timeoutMs?: number; env?: Record<string, string> }): Promise<ExecResult>;
  /** As exec, but a non-zero exit is an error that carries the command's output. */
  sh(command: string, options?: { timeoutMs?: number; env?: Record<string, string> }): Promise<string>;
}

export interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The tarball of a bookworm minbase root with BASE_PACKAGES and `extra` (made by mmdebstrap on
 * first use, about a minute; later calls in the same run reuse it). Concurrent test processes
 * wait for the one making it (a lock directory beside it).
 */
export async function debianRootTarball(t: Teardownable, extra: string[] = []): Promise<string> {
  const packages = [...BASE_PACKAGES, ...extra];
  const shared = process.env.GATE_MUX_SYSTEM_CACHE;
  const dir = shared ?? (await tempDir(t, 'debian-root'));
  await mkdir(dir, { recursive: true });
  const tarball = join(dir, `bookworm-${packages.join('+')}.tar`);
  if (existsSync(tarball)) return tarball;
  const lock = `${tarball}.lock`;
  // mkdir is atomic: the process that makes the lock builds, the others wait for the tarball.
  const mine = await mkdir(lock).then(
    () => true,
    () => false,
  );
  if (!mine) {
    await until(() => existsSync(tarball) || !existsSync(lock), `another test making ${tarball}`, 600_000);
    if (existsSync(tarball)) return tarball;
    return debianRootTarball(t, extra);
  }
  // mmdebstrap writes a tarball when the name ends in .tar (else a directory).
  const partial = `${tarball.slice(0, -'.tar'.length)}.partial.tar`;
  try {
    const made = await run('mmdebstrap', ['--variant=minbase', `--include=${packages.join(',')}`, 'bookworm', partial], {
      timeoutMs: 600_000,
    });
    if (made.code !== 0) throw new Error(`mmdebstrap failed (${made.code}):\n${made.stderr.slice(-3000)}`);
    await rename(partial, tarball);
  } finally {
    await rm(partial, { recursive: true, force: true });
    await rmdir(lock).catch(() => {});
  }
  return tarball;
}

/** Unpacks `tarball` into a fresh directory and boots it; powered off and removed at teardown. */
export async function bootDebian(t: Teardownable, tarball: string, prepare?: (root: string) => Promise<void>): Promise<Booted> {
  const dir = await tempDir(t, 'booted');
  const root = join(dir, 'root');
  await mkdir(root);
  const unpacked = await run('tar', ['-xf', tarball, '-C', root], { timeoutMs: 120_000 });
  if (unpacked.code !== 0) throw new Error(`tar: ${unpacked.stderr}`);
  // No package source but the tests' own: the container has no network to reach Debian's.
  await rm(join(root, 'etc/apt/sources.list'), { force: true });
  if (prepare) await prepare(root);
  await mkdir('/run/systemd/nspawn', { recursive: true });
  const nspawn: ChildProcess = spawn(
    'systemd-nspawn',
    ['-D', root, '--register=no', '--keep-unit', '--boot', '--console=pipe', '--private-network', `--machine=gate-${process.pid}`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  nspawn.stdout?.on('data', (d) => (output = (output + d).slice(-20_000)));
  nspawn.stderr?.on('data', (d) => (output = (output + d).slice(-20_000)));
  const exited = new Promise<void>((resolve) => nspawn.once('exit', () => resolve()));
  // Registered after tempDir's removal, so it runs first: power off, then the copy goes.
  t.teardown(async () => {
    if (nspawn.exitCode !== null || nspawn.signalCode !== null) return;
    nspawn.kill('SIGTERM'); // nspawn asks the container's systemd to power off
    const timer = setTimeout(() => nspawn.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  });

  let pid = 0;
  await until(
    async () => {
      if (nspawn.exitCode !== null) throw new Error(`systemd-nspawn exited (${nspawn.exitCode}):\n${output}`);
      const children = await run('pgrep', ['-P', String(nspawn.pid)]);
      pid = Number(children.stdout.trim().split('\n')[0]);
      if (!pid) return false;
      return (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() === 'systemd';
    },
    "the container's systemd",
    30_000,
  );

  const exec = (command: string, options: { timeoutMs?: number; env?: Record<string, string> } = {}): Promise<ExecResult> => {
    const env = Object.entries({ PATH, LANG: 'C.UTF-8', ...options.env }).map(([k, v]) => `${k}=${v}`);
    return run('nsenter', ['-t', String(pid), '-a', 'env', '-i', ...env, '/bin/sh', '-c', command], {
      timeoutMs: options.timeoutMs ?? 120_000,
    });
  };
  const sh = async (command: string, options?: { timeoutMs?: number; env?: Record<string, string> }): Promise<string> => {
    const r = await exec(command, options);
    if (r.code !== 0) throw new Error(`in the container: ${command}: exit ${r.code}\n${r.stdout}${r.stderr}`);
    return r.stdout;
  };
  // `running`, or `degraded` (the caller decides what matters); systemctl fails until PID 1's bus is up.
  let state = '';
  await until(
    async () => {
      state = (await exec('systemctl is-system-running --wait', { timeoutMs: 120_000 })).stdout.trim();
      if (!/^(running|degraded)$/.test(state)) await new Promise((resolve) => setTimeout(resolve, 200));
      return /^(running|degraded)$/.test(state);
    },
    `the container to finish booting (last state ${JSON.stringify(state)})`,
    120_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${output}`);
  });
  return { root, pid, exec, sh };
}
