import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Teardownable } from './daemon.js';
import { readUntil } from './net.js';

/** The `gate-mux` command, as `npm start` and `npx gate-mux proxy` run it. */
export const GATE_MUX = fileURLToPath(new URL('../../lib/cli/gate-mux.js', import.meta.url));

export interface StartedProxy {
  child: ChildProcess;
  /** Everything it wrote so far, stdout and stderr. */
  output: () => string;
}

/**
 * Starts `gate-mux proxy` (`npm start`'s program) and waits for its "try:" line (printed once it
 * listens). With `openFiles`, under that descriptor limit: `bash -c 'ulimit -n N; exec node ...'`
 * (soft and hard, as a unit's LimitNOFILE), the process keeping its pid. `script`: another
 * build's gate-mux.js (versioned-build.ts). Killed at teardown.
 */
export async function startProxyCommand(
  t: Teardownable,
  args: string[],
  cwd: string,
  options: { openFiles?: number; script?: string } = {},
): Promise<StartedProxy> {
  const node = [process.execPath, options.script ?? GATE_MUX, 'proxy', ...args];
  const child =
    options.openFiles === undefined
      ? spawn(node[0]!, node.slice(1), { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('bash', ['-c', `ulimit -n ${options.openFiles} && exec "$@"`, 'bash', ...node], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await readUntil(child.stdout!, () => output.includes('try: curl') || child.exitCode !== null);
  child.stdout!.resume();
  if (!output.includes('try: curl')) throw new Error(`gate-mux proxy did not start:\n${output}`);
  return { child, output: () => output };
}

/** SIGTERM, then the exit code once it has exited. */
export async function stopProxyCommand(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  return code;
}
