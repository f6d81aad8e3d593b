import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Server } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { descendants } from '../../bench/proc.js';
import { freePort, waitForPort } from '../../bench/spawn.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { closeServer, readUntil, startTaggedTcpServer, startTaggedTlsServer, tlsClient } from '../helpers/net.js';

// The bench router is a peer other harnesses run: check it as a black box (a child process,
// configured by environment) routes bench.local + ALPN gate-bench to A and every other hello to B.
const routerScript = fileURLToPath(new URL('../../bench/router.js', import.meta.url));
const tunnelRouterScript = fileURLToPath(new URL('../../bench/tunnel-router.js', import.meta.url));
const upA = await startTaggedTlsServer('A');
const upB = await startTaggedTlsServer('B');
// Behind the routers that end the client's TLS (the tunnel's comparison): cleartext upstreams.
const clearA = await startTaggedTcpServer('A');
const clearB = await startTaggedTcpServer('B');
t.teardown(async () => {
  for (const up of [upA, upB, clearA, clearB]) {
    for (const socket of (up as { sockets?: Set<{ destroy(): void }> }).sockets ?? []) socket.destroy();
    await closeServer(up.server as Server);
  }
});

async function startRouter(
  env: Record<string, string> = {},
  script = routerScript,
  ups = [upA, upB],
): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [script], {
    env: {
      ...process.env,
      LISTEN_PORT: String(port),
      UPSTREAM_A_PORT: String(ups[0]!.port),
      UPSTREAM_B_PORT: String(ups[1]!.port),
      ...env,
    },
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
  return line.trim().split(' ')[0] ?? '';
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
  t.same(
    replaced.filter((pid) => descendants(1).includes(pid)),
    [],
    'no worker outlives the primary',
  );
});

const routerTls = { TLS_KEY: devCertificates().server.key, TLS_CERT: devCertificates().server.cert };

t.test('TERMINATE=1: ends the client TLS and routes the cleartext to A or B', async (t) => {
  const { child, port } = await startRouter({ TERMINATE: '1', ...routerTls }, routerScript, [clearA, clearB]);
  await checkRouting(t, port);
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  t.equal(code, 0, 'exits cleanly on SIGTERM');
});

t.test('tunnel router: A through an agent process, B forwarded; both stop on SIGTERM', async (t) => {
  const { child, port } = await startRouter(routerTls, tunnelRouterScript, [clearA, clearB]);
  const agents = descendants(child.pid!);
  t.equal(agents.length, 1, 'the agent runs as a child process');
  await checkRouting(t, port);
  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  t.equal(code, 0, 'exits cleanly on SIGTERM');
  t.same(
    agents.filter((pid) => descendants(1).includes(pid)),
    [],
    'the agent does not outlive the router',
  );
});

t.test('tunnel router killed outright: its agent does not stay behind', async (t) => {
  const { child } = await startRouter(routerTls, tunnelRouterScript, [clearA, clearB]);
  const [agent] = descendants(child.pid!);
  t.ok(agent, 'an agent process runs');
  child.kill('SIGKILL');
  let alive = true;
  for (let i = 0; i < 100 && alive; i++) {
    await sleep(50);
    alive = descendants(1).includes(agent!);
  }
  t.notOk(alive, 'the agent exited once its router was gone');
});

// The peering peers: upstream A behind an agent's tunnel held by the router itself (LOCAL_TUNNEL=1)
// or by another proxy the router reaches over peering. Same rule, same black-box check.
for (const [name, env] of [
  ['gate-mux-local-tunnel', { LOCAL_TUNNEL: '1' }],
  ['gate-mux-peered', {}],
] as const) {
  t.test(`${name}: routes A through the tunnel and stops its processes on SIGTERM`, async (t) => {
    const { child, port } = await startRouter(env, fileURLToPath(new URL('../../bench/peered-router.js', import.meta.url)));
    const tree = descendants(child.pid!);
    t.ok(tree.length >= 1, 'the agent (and the holder) run as children');
    await checkRouting(t, port);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    t.equal(code, 0, 'exits cleanly on SIGTERM');
    for (let i = 0; i < 100 && tree.some((pid) => descendants(1).includes(pid)); i++) await sleep(50);
    t.same(
      tree.filter((pid) => descendants(1).includes(pid)),
      [],
      'no child outlives the router',
    );
  });
}
