// Dials across the cluster: three GateProxy instances in one process share a
// MemoryRouteStore and one data_dir (so one cluster CA); a real agent holds its tunnel to B; real
// TLS clients reach the target through A (behind PROXY v2, whose source reaches the agent side)
// and C. An agent held nowhere fails at once with GATE_ERR_AGENT_OFFLINE; with the store down,
// local tunnels keep working and remote dials fail with GATE_ERR_STORE_UNAVAILABLE; a holder that
// died without leaving the store makes the next holder be tried.
import t from 'tap';
import { once } from 'node:events';
import { ClusterDialer } from '../../lib/cluster/cluster-dialer.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import type { InventoryRecord, ProxyPresence, RouteStore, TunnelHolding } from '../../lib/cluster/route-store.js';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { captureLogs } from '../hardening/log-capture.js';
import { mongoHello, saidBeforeClose, startPeeringCluster as cluster, clusterClient as client } from '../helpers/cluster.js';
import { echoOnce, run, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { startPostgres } from '../helpers/postgres.js';
import { tunnelDuplex } from '../../lib/tunnel/tunnel-stream.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

/** A MemoryRouteStore that can be made to fail every call, as an unreachable Redis does. */
class SwitchableStore implements RouteStore {
  down = false;
  readonly inner = new MemoryRouteStore();
  private check(): void {
    if (this.down) throw new GateError(ErrorCodes.STORE_UNAVAILABLE, 'route store: connection refused (test)');
  }
  async announce(p: ProxyPresence, ttlMs: number): Promise<void> {
    this.check();
    return this.inner.announce(p, ttlMs);
  }
  async withdraw(id: string): Promise<void> {
    this.check();
    return this.inner.withdraw(id);
  }
  async proxies(): Promise<ProxyPresence[]> {
    this.check();
    return this.inner.proxies();
  }
  async holdTunnel(h: TunnelHolding, ttlMs: number): Promise<void> {
    this.check();
    return this.inner.holdTunnel(h, ttlMs);
  }
  async dropTunnel(h: TunnelHolding): Promise<boolean> {
    this.check();
    return this.inner.dropTunnel(h);
  }
  async holders(agent: string): Promise<TunnelHolding[]> {
    this.check();
    return this.inner.holders(agent);
  }
  async putAgentRecord(r: InventoryRecord, ttlMs: number): Promise<void> {
    this.check();
    return this.inner.putAgentRecord(r, ttlMs);
  }
  async dropAgentRecord(key: { serverId: string; proxyId: string; generation: number }): Promise<boolean> {
    this.check();
    return this.inner.dropAgentRecord(key);
  }
  async agentRecords(): Promise<InventoryRecord[]> {
    this.check();
    return this.inner.agentRecords();
  }
  async close(): Promise<void> {}
}

t.test('a client on any proxy reaches the agent wherever its tunnel is', async (t) => {
  const store = new SwitchableStore();
  const c = await cluster(t, store);
  const a = await c.start({ proxyService: { proxy_protocol: 'on' } });
  const b = await c.start();
  const third = await c.start();
  const agentLogs = captureLogs();
  await c.agent(b, { logger: agentLogs.logger });
  t.same(
    (await store.holders('edge')).map((h) => h.proxyId),
    [b.proxy.proxyId],
    'B holds the tunnel, in the store',
  );

  const viaA = await client(a, c.ca.cert, 'gate-mongodb', { address: '198.51.100.20', port: 5555 });
  t.equal(await echoOnce(viaA, 'client on A'), 'client on A', 'A forwards to B over peering');
  await until(
    () => agentLogs.lines.some((l) => l.msg === 'stream opened' && l.client === '198.51.100.20:5555'),
    'the agent saw the client address',
  );
  t.pass("the client's real address (PROXY v2 on A) reached the agent side");
  const viaC = await client(third, c.ca.cert, 'gate-mongodb');
  t.equal(await echoOnce(viaC, 'client on C'), 'client on C', 'and C too');
  const viaB = await client(b, c.ca.cert, 'gate-mongodb');
  t.equal(await echoOnce(viaB, 'client on B'), 'client on B', 'B uses its own tunnel');
  t.equal(b.stats('peer').accepted, 2, 'one peering session from A and one from C');
  t.same(proxyParts(a.proxy).peers.connected(), [b.proxy.proxyId]);
  for (const s of [viaA, viaB, viaC]) s.destroy();

  // Offline everywhere: the same prompt failure as one proxy.
  t.match(
    await saidBeforeClose(await client(a, c.ca.cert, 'gate-redis', { address: '198.51.100.21', port: 1 }), 'PING\r\n'),
    /^-ERR gate: agent "\S+" is offline \(GATE_ERR_AGENT_OFFLINE\)\r\n$/,
    'a client of an agent held nowhere is told so, and closed',
  );
  await until(() => a.stats('multiplex').failures[ErrorCodes.AGENT_OFFLINE] === 1, 'GATE_ERR_AGENT_OFFLINE recorded on A');

  // The store down: B's local tunnel keeps working; A cannot learn who holds the agent.
  store.down = true;
  const local = await client(b, c.ca.cert, 'gate-mongodb');
  t.equal(await echoOnce(local, 'store down, local'), 'store down, local', 'local tunnels work without the store');
  local.destroy();
  t.match(
    await saidBeforeClose(await client(a, c.ca.cert, 'gate-mongodb', { address: '198.51.100.22', port: 2 }), mongoHello()),
    `(${ErrorCodes.STORE_UNAVAILABLE})`,
    'a remote dial fails, and the driver is told why',
  );
  await until(() => a.stats('multiplex').failures[ErrorCodes.STORE_UNAVAILABLE] === 1, 'with GATE_ERR_STORE_UNAVAILABLE');
  store.down = false;
  // A refresh of each now: an outage near the TTL may have let B's records expire while B still
  // counts as registered (its last announce is recent), and B re-asserts them only at its next tick.
  await Promise.all([proxyParts(a.proxy).cluster.refresh(), proxyParts(b.proxy).cluster.refresh()]);
  t.ok(proxyParts(a.proxy).cluster.registered && proxyParts(b.proxy).cluster.registered, 'both registered again');
  const back = await client(a, c.ca.cert, 'gate-mongodb', { address: '198.51.100.23', port: 3 });
  t.equal(await echoOnce(back, 'store back'), 'store back', 'remote dials work again once the store is back');
  back.destroy();

  // B stops: it leaves the store at once, A closes its session to B, and the agent is offline.
  // A connection open through B at that moment is closed with a code, never left hanging.
  const midway = await client(a, c.ca.cert, 'gate-mongodb', { address: '198.51.100.25', port: 5 });
  t.equal(await echoOnce(midway, 'open through B'), 'open through B');
  const streamFailures = a.stats('multiplex').failures[ErrorCodes.AGENT_STREAM_FAILED] ?? 0;
  const midwayClosed = once(midway, 'close');
  await b.proxy.close({ graceMs: 0 });
  await midwayClosed;
  await until(
    () => (a.stats('multiplex').failures[ErrorCodes.AGENT_STREAM_FAILED] ?? 0) === streamFailures + 1,
    'the client of the dead path closed with GATE_ERR_AGENT_STREAM_FAILED',
  );
  await until(() => proxyParts(a.proxy).peers.connected().length === 0, "A closed B's session when B left the store", 5_000);
  t.match(
    await saidBeforeClose(await client(a, c.ca.cert, 'gate-mongodb', { address: '198.51.100.24', port: 4 }), mongoHello()),
    `(${ErrorCodes.AGENT_OFFLINE})`,
  );
  await until(() => a.stats('multiplex').failures[ErrorCodes.AGENT_OFFLINE] === 2, 'the agent is offline once its only holder left');
});

t.test('a holder that died without leaving the store: the next holder is tried', async (t) => {
  const store = new MemoryRouteStore();
  const c = await cluster(t, store);
  const logs = captureLogs();
  const a = await c.start({ logger: logs.logger });
  const b = await c.start();
  const third = await c.start();
  await c.agent(b);
  await c.agent(third);
  const holders = (await store.holders('edge')).map((h) => h.proxyId);
  t.same(holders, [b.proxy.proxyId, third.proxy.proxyId], 'B and C both hold a tunnel of edge');

  // B dies as under kill -9: its port is gone, its records stay until their TTL.
  const deadB = (await store.proxies()).find((p) => p.id === b.proxy.proxyId)!;
  await b.proxy.close({ graceMs: 0 });
  await store.announce(deadB, 60_000);
  await store.holdTunnel({ agent: 'edge', proxyId: deadB.id, generation: 1 }, 60_000);

  // A draw that puts B first (Fisher–Yates on two: 0 swaps, 0.99 keeps), so the dial must go on to C.
  const bFirst = (await store.holders('edge'))[0]?.proxyId === deadB.id ? 0.99 : 0;
  const dialer = new ClusterDialer({
    registry: a.proxy.tunnels,
    cluster: { store, member: proxyParts(a.proxy).cluster, peers: proxyParts(a.proxy).peers },
    random: () => bFirst,
    logger: logs.logger,
  });
  t.teardown(() => dialer.close());
  const stream = tunnelDuplex(await dialer.open('edge', c.echo, { client: '198.51.100.30:6000' }));
  stream.on('error', () => {}); // reset if still open when the proxies stop at teardown
  t.equal(await echoOnce(stream, 'via the next holder'), 'via the next holder');
  stream.end();
  const failed = logs.lines.find((l) => l.code === ErrorCodes.PEER_DIAL_FAILED);
  t.equal(failed?.peer, deadB.id, 'the dead holder was tried first and failed with GATE_ERR_PEER_DIAL_FAILED');

  // Through A's route as well, whatever order it draws: every client gets through.
  for (let i = 0; i < 4; i++) {
    const s = await client(a, c.ca.cert, 'gate-mongodb');
    t.equal(await echoOnce(s, `client ${i}`), `client ${i}`);
    s.destroy();
  }

  // The target refused by the agent is final: no other holder is asked.
  const before = logs.lines.filter((l) => l.code === ErrorCodes.PEER_DIAL_FAILED).length;
  const denied = await dialer.open('edge', '127.0.0.1:9').catch((err: GateError) => err);
  t.equal((denied as GateError).code, ErrorCodes.AGENT_TARGET_DENIED);
  t.ok(
    logs.lines.filter((l) => l.code === ErrorCodes.PEER_DIAL_FAILED).length - before <= 1,
    'at most the dead holder was tried before the refusal',
  );
});

t.test('psql on one proxy, PostgreSQL behind an agent whose tunnel another proxy holds', async (t) => {
  const pg = await startPostgres(t);
  const psql = requirePeer(t, 'psql', 'postgresql-client');
  if (!pg || !psql) return;
  const target = `127.0.0.1:${pg.port}`;
  const c = await cluster(t, new MemoryRouteStore());
  const a = await c.start({ upstreams: { postgres: `tunnel:edge/${target}` } });
  const b = await c.start({ upstreams: { postgres: `tunnel:edge/${target}` } });
  await c.agent(b, { resources: [c.echo, target] });
  // As the README has it: psql straight at the proxy's port, TLS verified against the cluster CA.
  const result = await run(
    psql,
    [
      `host=localhost port=${a.port('multiplex')} sslmode=verify-full sslrootcert=${a.caFile} user=${pg.user} dbname=postgres`,
      '-Atc',
      "select 'across the cluster', 6 * 7",
    ],
    {
      env: { ...process.env, PGCONNECT_TIMEOUT: '10' },
    },
  );
  t.equal(result.code, 0, result.stderr);
  t.equal(result.stdout.trim(), 'across the cluster|42', 'psql on A, the tunnel on B');
  t.equal(b.stats('peer').accepted, 1, 'through the peering session A opened to B');
});
