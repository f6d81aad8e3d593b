import { spawn } from 'node:child_process';
import { startLocalProxy, type LocalProxyOptions } from '../../lib/client/local-proxy.js';
import type { Teardownable } from './daemon.js';
import type { RunningGateProxy } from './gate-proxy.js';

export interface ClientResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
}

/**
 * Runs a stock client to completion with bytes in and bytes out (so binary payloads compare byte
 * for byte), killed after `timeoutMs`. The environment is exactly `env` (default: PATH only), so
 * the machine's proxy variables or client config never leak into a test.
 */
export function runClient(
  command: string,
  args: string[],
  options: { input?: Buffer | string; env?: NodeJS.ProcessEnv; timeoutMs?: number; uid?: number; gid?: number } = {},
): Promise<ClientResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: options.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      // As another user (a root test running a command as a non-root agent's user).
      ...(options.uid === undefined ? {} : { uid: options.uid }),
      ...(options.gid === undefined ? {} : { gid: options.gid }),
    });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr });
    });
    child.stdin.on('error', () => undefined); // the client may exit before reading all its input
    child.stdin.end(options.input);
  });
}

/** One line of a client result for assertion messages. */
export function describeResult(result: ClientResult): string {
  return `exit ${result.code ?? result.signal}; stderr: ${result.stderr.trim().slice(0, 2000) || '(none)'}`;
}

/**
 * `startLocalProxy` on 127.0.0.1:0 towards a listener of the proxy under test, trusting its
 * development CA for the name `localhost`, with no environment proxy unless `env`/`proxy` say
 * otherwise. Closed at teardown. Returns the port stock clients dial.
 */
export async function localProxyTo(
  t: Teardownable,
  gate: RunningGateProxy,
  listener: string,
  alpn: string[],
  options: Partial<LocalProxyOptions> = {},
): Promise<number> {
  const local = await startLocalProxy({
    listen: { host: '127.0.0.1', port: 0 },
    target: gate.address(listener),
    alpn,
    serverName: 'localhost',
    ca: gate.ca,
    env: {},
    ...options,
  });
  t.teardown(() => local.close());
  return local.address().port;
}
