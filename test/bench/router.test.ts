import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Server } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { descendants } from '../../bench/proc.js';
import { freePort, waitForPort } from '../../bench/spawn.js';
import { closeServer, readUntil, startTaggedTlsServer, tlsClient } from '../helpers/net.js';

// The bench router is a peer other harnesses run: check it as a black box (a child process,
// configured by environment) routes bench.local + ALPN gate-bench to A and every other hello to B.
const routerScript = fileURLToPath(new URL('../../bench/router.js', import.meta.url));
const upA = await startTaggedTlsServer('A');
const upB = await startTaggedTlsServer('B');
t.teardown(async () => {
  await closeServer(upA.server as Server);
  await closeServer(upB.server as Server);
});

async function startRouter(env: Record<string, string> = {}, script = routerScript): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, LISTEN_PORT: String(port), UPSTREAM_A_PORT: String(upA.port), UPSTREAM_B_PORT: String(upB.port), ...env },
    stdio: ['ignore', 'pipe', process.env.DEBUG_ROUTER ? 'inherit' : 'ignore'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  // The router says so once every worker has started (the port alone answers after the first).
  const line = await readUntil(child.stdout!, (text) => text.includes('\n'));
  t.match(line, /^(\w+ )?router listening on/, 'router reports it is listening');
  return { child, port };
}

/** The tag line of the upstream the router picked for this hello. */
async function upstreamFor(port: number, servername: string, alpn: string[]): Promise<string> {
  const socket = await tlsClient(port, { servername, ALPNProtocols: alpn, checkServerIdentity: () => undefined });
  const line = await readUntil(socket, (text) => text.includes('\n'));
  socket.destroy();
  return line.split(' ')[0] ?? '';
}

async function checkRouting(t: { equal: (a: unknown, b: unknown, m: string) => unknown }, port: number): Promise<void> {
  t.equal(await upstreamFor(port, 'bench.local', ['gate-bench']), 'A', 'bench.local + gate-bench -> A');
  t.equal(await upstreamFor(port, 'bench.local', ['h2', 'gate-bench']), 'A', 'gate-bench anywhere in the ALPN list -> A');
  t.equal(await upstreamFor(port, 'Bench.Local', ['gate-bench']), 'A', 'SNI compared case-insensitively');
  t.equal(await upstreamFor(port, 'bench.local', ['h2']), 'B', 'bench.local without gate-bench -> B');
  t.equal(await upstreamFor(port, 'other.local', ['gate-bench']), 'B', 'gate-bench with another SNI -> B');
}

t.test('single process: routes and stops on SIGTERM', async (t) => {
  const { child, port } = await startRouter();
  await checkRouting(t, port);
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  t.equal(code, 0, 'exits cleanly on SIGTERM');
});

t.test('WORKERS=2: routes through the cluster, restarts a killed worker, stops all on SIGTERM', async (t) => {
  const { child, port } = await startRouter({ WORKERS: '2' });
  const workers = descendants(child.pid!);
  t.equal(workers.length, 2, 'two worker processes');
  await checkRouting(t, port);
  process.kill(workers[0]!, 'SIGKILL');
  let replaced: number[] = [];
  for (let i = 0; i < 100; i++) {
    await sleep(50);
    replaced = descendants(child.pid!);
    if (replaced.length === 2 && !replaced.includes(workers[0]!)) break;
  }
  t.equal(replaced.length, 2, 'back to two workers');
  t.notOk(replaced.includes(workers[0]!), 'the killed worker was replaced');
  await waitForPort(port, child);
  t.equal(await upstreamFor(port, 'bench.local', ['gate-bench']), 'A', 'still routes after the restart');
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  t.equal(code, 0, 'primary exits cleanly on SIGTERM');
  t.same(replaced.filter((pid) => descendants(1).includes(pid)), [], 'no worker outlives the primary');
});

// The tunnelled peers: upstream A behind an agent's tunnel, held by the router itself or (issue 14)
// by another proxy the router reaches over peering. Same rule, same black-box check.
for (const [name, script] of [['gate-mux-tunnel', 'tunnel-router.js'], ['gate-mux-peered', 'peered-router.js']] as const) {
  t.test(`${name}: routes A through the tunnel and stops its processes on SIGTERM`, async (t) => {
    const { child, port } = await startRouter({}, fileURLToPath(new URL(`../../bench/${script}`, import.meta.url)));
    const tree = descendants(child.pid!);
    t.ok(tree.length >= 1, 'the agent (and the holder) run as children');
    await checkRouting(t, port);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    t.equal(code, 0, 'exits cleanly on SIGTERM');
    for (let i = 0; i < 100 && tree.some((pid) => descendants(1).includes(pid)); i++) await sleep(50);
    t.same(tree.filter((pid) => descendants(1).includes(pid)), [], 'no child outlives the router');
  });
}
