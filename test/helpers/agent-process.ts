import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Teardownable } from './daemon.js';

export interface AgentProcess {
  child: ChildProcess;
  /** Everything it wrote so far, stdout and stderr. */
  output(): string;
  exited: Promise<unknown>;
}

/** An agent program (`node <script> ...args`) in its own process with `env` only; killed at teardown. */
export function spawnAgentProcess(t: Teardownable, script: string, args: string[], env: NodeJS.ProcessEnv): AgentProcess {
  const child = spawn(process.execPath, [script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  const exited = once(child, 'exit');
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { child, output: () => text, exited };
}
