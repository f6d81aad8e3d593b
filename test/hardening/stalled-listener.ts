import { spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';

/**
 * A TCP port that never accepts: a child process listens with backlog 1 (Node turns 0 into 511), then blocks its thread
 * (Atomics.wait: no CPU), so the kernel's accept queue fills and later SYNs are dropped — a dial
 * to it stalls until the dialer's own timeout. `close()` kills the child and the filler sockets.
 */
export async function stalledListener(): Promise<{ port: number; close: () => Promise<void> }> {
  const code = [
    "const s = require('node:net').createServer();",
    "s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {",
    "  process.stdout.write(s.address().port + '\\n');",
    '  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);',
    '});',
  ].join('\n');
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  let out = '';
  for await (const chunk of child.stdout) {
    out += String(chunk);
    if (out.includes('\n')) break;
  }
  const port = Number(out.trim());
  // Fill the accept queue (backlog 1 holds two): these complete, later ones stall.
  const fillers: Socket[] = [];
  for (let i = 0; i < 3; i++) {
    const s = connect({ host: '127.0.0.1', port });
    s.on('error', () => {});
    fillers.push(s);
  }
  await new Promise((r) => setTimeout(r, 100));
  return {
    port,
    close: async () => {
      for (const s of fillers) s.destroy();
      child.kill('SIGKILL');
      await exited;
    },
  };
}
