// Agents on several proxies. Real parts, loopback only: GateProxy instances in
// this process sharing one cluster CA (one data_dir), behind a real HAProxy in TCP round-robin mode
// (Debian package haproxy), and once behind tinyproxy (tinyproxy); the agent reaches the proxies
// only through the balancer, and learns which proxy each tunnel landed on from the proxies'
// cluster views, which each GateProxy keeps current from the route store they share (a
// MemoryRouteStore here, presence_ttl 3s: a closed proxy withdraws at once and leaves the others'
// lists at their next refresh, within a second; a TTL as short as 1 s would let a loaded machine
// that stalls the refresh timers expire a live proxy, change every view, and start dials no test
// expects).
import t from 'tap';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import type { KeyPair } from '../../lib/pki/certificate-authority.js';
import { startAgent, type AgentOptions, type TunnelAgent } from '../../lib/tunnel/agent.js';
import { serveAgentStream } from '../../lib/tunnel/agent-stream.js';
import { ALPN_REVERSE_TUNNEL_FRAMED } from '../../lib/wire/names.js';
import { tunnelDuplex } from '../../lib/tunnel/tunnel-stream.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import { type AnswerPayload, StreamKind } from '../../lib/tunnel-framing/frames.js';
import { everyProxySeesTheCluster, roundRobinFront, startClusterInProcess } from '../helpers/cluster.js';
import type { Teardownable } from '../helpers/daemon.js';
import type { RunningGateProxy } from '../helpers/gate-proxy.js';
import { freezableRelay, readUntil, startTaggedTcpServer, tlsClient, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';
import { agentCertificate, rawAgentSession, startProxySide } from '../helpers/tunnel-rig.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';

const AGENT = 'pool-agent';

interface Cluster {
  proxies: RunningGateProxy[];
  /** The id each proxy tells its agents (GateProxy.proxyId). */
  ids: string[];
  store: MemoryRouteStore;
  /** `127.0.0.2:port`: HAProxy, round robin over the proxies' shared ports. */
  front: string;
  frontPort: number;
  /** The cluster CA (PEM) and an agent certificate from it. */
  ca: string;
  agentPair: KeyPair;
  /** Options for the pool agent through the balancer (one certificate from the cluster CA). */
  agentOptions(extra: Partial<AgentOptions>): AgentOptions;
  /** The proxies (by index) whose registry holds the agent now. */
  holders(): number[];
}

/**
 * `count` GateProxy instances sharing one cluster CA and one route store (unless `ownStores`: each
 * its own, so each tells agents only itself until the test says otherwise), and HAProxy in front.
 */
async function startBalancedCluster(
  t: Teardownable & Parameters<typeof requirePeer>[0],
  count: number,
  options: { ownStores?: boolean } = {},
): Promise<Cluster | undefined> {
  const haproxy = requirePeer(t, 'haproxy', 'haproxy');
  if (!haproxy) return undefined;
  const echo = await startTaggedTcpServer('through-the-agent');
  t.teardown(() => {
    for (const s of echo.sockets) s.destroy();
    echo.server.close();
  });
  const store = new MemoryRouteStore();
  const cluster = await startClusterInProcess(t, {
    upstreams: { redis: `tunnel:${AGENT}/127.0.0.1:${echo.port}` },
    store: options.ownStores ? 'own' : store,
  });
  // One after the other: the first makes the cluster CA in the shared data_dir, the others load it.
  for (let i = 0; i < count; i++) await cluster.start();
  const { proxies } = cluster;
  const { front, port } = await roundRobinFront(t, haproxy, proxies);
  // Every proxy sees the others at its next refresh (a third of presence_ttl).
  if (!options.ownStores) await everyProxySeesTheCluster(cluster);
  return {
    proxies,
    ids: proxies.map((p) => p.proxy.proxyId),
    store,
    front,
    frontPort: port,
    ca: cluster.ca.cert,
    agentPair: cluster.agentPair(AGENT),
    agentOptions: (extra) => cluster.agentOptions(front, AGENT, extra),
    holders: () => proxies.flatMap((p, i) => (p.proxy.tunnels.has(AGENT) ? [i] : [])),
  };
}

function poolAgent(t: Teardownable, cluster: Cluster, extra: Partial<AgentOptions> = {}): TunnelAgent {
  const agent = startAgent(cluster.agentOptions({ allow: () => true, heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 5000, ...extra }));
  t.teardown(() => agent.close());
  return agent;
}

/** The proxy ids of the agent's tunnels, sorted. */
function tunnelIds(agent: TunnelAgent): string[] {
  return agent.tunnels.map((x) => x.proxyId ?? '?').sort();
}

/** Reads the greeting a client gets through proxy `p`'s redis route (so through the agent's tunnel to p). */
async function throughProxy(cluster: Cluster, p: number): Promise<string> {
  const socket = await tlsClient(cluster.proxies[p]!.port('multiplex'), {
    servername: 'localhost',
    ca: cluster.ca,
    ALPNProtocols: ['gate-redis'],
  });
  try {
    return (await readUntil(socket, (s) => s.includes('\n'))).trim();
  } finally {
    socket.destroy();
  }
}

/**
 * Dials the agent made during `ms` (nothing else happens meanwhile): a settled pool makes none.
 * This is no timing assert: any dial at all in the window is the failure.
 */
async function dialsDuring(agent: TunnelAgent, ms: number): Promise<number> {
  const before = agent.dials;
  await new Promise((resolve) => setTimeout(resolve, ms));
  return agent.dials - before;
}

t.test(
  'two proxies behind HAProxy round robin, connection_count 2: one tunnel on each, clients on either proxy reach the agent',
  async (t) => {
    const cluster = await startBalancedCluster(t, 2);
    if (!cluster) return;
    const agent = poolAgent(t, cluster, { connectionCount: 2 });
    await until(() => agent.tunnels.length === 2, 'two tunnels up', 15_000);
    t.same(tunnelIds(agent), [...cluster.ids].sort(), 'on two distinct proxies');
    t.same(agent.proxies, [...cluster.ids].sort(), 'the agent learned the cluster from the proxies');
    t.same(cluster.holders(), [0, 1], 'each proxy holds the agent');
    t.equal(await throughProxy(cluster, 0), 'through-the-agent', 'a client on proxy a reaches the target');
    t.equal(await throughProxy(cluster, 1), 'through-the-agent', 'a client on proxy b reaches the target');
    t.equal(await dialsDuring(agent, 1500), 0, 'settled: no further dials');
    t.equal(agent.tunnels.length, 2, 'still exactly two');
  },
);

t.test(
  'a dial that lands on a proxy the agent holds is refused there as a duplicate and retried, never taken for a failure; a shrunk list stops it',
  async (t) => {
    // Only proxy a is behind this balancer, but the store says a proxy b is up too (one this balancer
    // does not reach): every further dial lands on a, which refuses a second tunnel under the same
    // name (GATE_ERR_AGENT_DUPLICATE).
    const cluster = await startBalancedCluster(t, 1);
    if (!cluster) return;
    const a = cluster.ids[0]!;
    await cluster.store.announce({ id: 'proxy-b', peerAddr: '', version: 'test', draining: false, channelFingerprint: '' }, 120_000);
    await until(() => cluster.proxies[0]!.proxy.tunnels.clusterView?.proxyIds.length === 2, 'proxy a lists proxy b');
    const refusedAtProxy: GateError[] = [];
    cluster.proxies[0]!.proxy.tunnels.on('agent-refused', (e: GateError) => refusedAtProxy.push(e));
    const lost: unknown[] = [];
    const agent = poolAgent(t, cluster, { connectionCount: 2 });
    agent.on('disconnected', (e) => lost.push(e));
    await agent.waitConnected();
    await until(() => agent.duplicates >= 3, 'three dials landed on the held proxy', 20_000);
    t.ok(
      refusedAtProxy.length >= 3 && refusedAtProxy.every((e) => e.code === ErrorCodes.AGENT_DUPLICATE),
      'the proxy refused each with GATE_ERR_AGENT_DUPLICATE',
    );
    t.same(tunnelIds(agent), [a], 'the held tunnel is untouched');
    t.equal(agent.connections, 1, 'it never dropped');
    t.same(lost, []);
    t.equal(await throughProxy(cluster, 0), 'through-the-agent');
    await cluster.store.withdraw('proxy-b');
    await until(() => agent.proxies?.length === 1, 'the agent forgot proxy b once the store did');
    // A dial already under way when the list shrank may still finish; after that the pool is settled.
    await dialsDuring(agent, 500);
    t.equal(await dialsDuring(agent, 1500), 0, 'one proxy left in the list: no more dials');
    t.same(tunnelIds(agent), [a]);
  },
);

t.test('a tunnel the agent learns landed on a proxy it already holds (same proxy id) is closed with GOAWAY', async (t) => {
  // Two proxies, each on its own store, that the test makes both say they are "proxy-x" (as a
  // proxy that admitted the agent twice would look), in a cluster of x and y, where y is not
  // behind this balancer. Their own lists never change, so nothing overwrites these views.
  const cluster = await startBalancedCluster(t, 2, { ownStores: true });
  if (!cluster) return;
  const seen: Array<{ proxy: number; event: string; reason?: string }> = [];
  cluster.proxies.forEach((p, i) => {
    p.proxy.tunnels.setClusterView({ proxyId: 'proxy-x', proxyIds: ['proxy-x', 'proxy-y'] });
    p.proxy.tunnels.on('agent-connected', () => seen.push({ proxy: i, event: 'connected' }));
    p.proxy.tunnels.on('agent-disconnected', (_name: string, reason: string) => seen.push({ proxy: i, event: 'disconnected', reason }));
  });
  const agent = poolAgent(t, cluster, { connectionCount: 2 });
  await until(() => seen.some((e) => e.event === 'disconnected'), 'a tunnel closed', 15_000);
  const first = seen[0]!.proxy;
  const other = first === 0 ? 1 : 0;
  t.same(
    seen.slice(0, 3).map((e) => [e.proxy, e.event]),
    [
      [first, 'connected'],
      [other, 'connected'],
      [other, 'disconnected'],
    ],
    'the second proxy admitted it, then lost it',
  );
  t.match(seen[2]!.reason, /agent sent GOAWAY \(NO_ERROR\)/, 'the agent closed it cleanly');
  t.ok(agent.duplicates >= 1, 'counted as a duplicate');
  t.same(tunnelIds(agent), ['proxy-x'], 'one tunnel to proxy-x');
  t.ok(cluster.proxies[first]!.proxy.tunnels.has(AGENT), 'the first proxy keeps its tunnel');
  t.equal(agent.connections, 1, 'only the first tunnel ever counted as up');
});

t.test(
  'three proxies, connection_count 2: a closed proxy is replaced, a proxy that leaves the list is forgotten, fewer proxies than the count hold one each without spinning',
  async (t) => {
    const cluster = await startBalancedCluster(t, 3);
    if (!cluster) return;
    const agent = poolAgent(t, cluster, { connectionCount: 2 });
    await until(() => agent.tunnels.length === 2, 'two tunnels up', 15_000);
    const held = tunnelIds(agent).map((id) => cluster.ids.indexOf(id));
    t.same([...held].sort(), cluster.holders(), 'the two proxies the agent names hold it');
    const [gone, kept] = held as [number, number];
    const spare = [0, 1, 2].find((i) => !held.includes(i))!;
    // Proxy `gone` stops: it leaves the store and sends its agents GOAWAY; the others drop it from
    // their lists at their next refresh.
    await cluster.proxies[gone]!.proxy.close({ graceMs: 200 });
    const live = [cluster.ids[kept]!, cluster.ids[spare]!].sort();
    await until(() => tunnelIds(agent).join() === live.join(), 'the agent re-established on the spare proxy', 15_000);
    t.pass('tunnels on the two live proxies');
    t.ok(cluster.proxies[spare]!.proxy.tunnels.has(AGENT) && cluster.proxies[kept]!.proxy.tunnels.has(AGENT), 'both hold it');
    await until(() => agent.proxies?.length === 2, 'the agent forgot the closed proxy once the store did');
    t.same(agent.proxies, live, 'the closed proxy is forgotten');
    t.equal(await throughProxy(cluster, spare), 'through-the-agent', 'the new tunnel carries clients');

    // One more proxy goes: fewer proxies than connection_count.
    await cluster.proxies[kept]!.proxy.close({ graceMs: 200 });
    await until(() => agent.tunnels.length === 1 && agent.proxies?.length === 1, 'one proxy left, one tunnel', 15_000);
    t.same(tunnelIds(agent), [cluster.ids[spare]!]);
    t.equal(await dialsDuring(agent, 1500), 0, 'one tunnel per proxy and no spinning for a second');
    t.equal(await throughProxy(cluster, spare), 'through-the-agent');
  },
);

t.test('connection_count 1: one tunnel although two proxies exist', async (t) => {
  const cluster = await startBalancedCluster(t, 2);
  if (!cluster) return;
  const agent = poolAgent(t, cluster, { connectionCount: 1 });
  const up = await agent.waitConnected();
  t.ok(cluster.ids.includes(up.proxyId ?? ''), 'the proxy said which one it is');
  t.equal(await dialsDuring(agent, 1500), 0, 'no second dial');
  t.equal(agent.tunnels.length, 1);
  t.equal(cluster.holders().length, 1, 'one proxy holds it');
});

t.test('through tinyproxy (CONNECT) and HAProxy: two tunnels on distinct proxies', async (t) => {
  const tinyproxy = await startTinyproxy(t);
  if (!tinyproxy) return;
  const cluster = await startBalancedCluster(t, 2);
  if (!cluster) return;
  // Loopback targets are always direct under HTTPS_PROXY (docs/client.md), so the proxy is
  // given as the environment would give it for a remote balancer.
  const agent = poolAgent(t, cluster, { connectionCount: 2, dialProxy: parseProxyUrl(tinyproxy.url) });
  const events: Array<{ via: string }> = [];
  agent.on('connected', (e: { via: string }) => events.push(e));
  await until(() => agent.tunnels.length === 2, 'two tunnels up', 15_000);
  t.same(tunnelIds(agent), [...cluster.ids].sort());
  t.ok(
    agent.tunnels.every((x) => x.via === tinyproxy.url),
    'both went through tinyproxy',
  );
  t.equal(
    (tinyproxy.output().match(new RegExp(`CONNECT 127\\.0\\.0\\.2:${cluster.frontPort}`, 'g')) ?? []).length >= 2,
    true,
    'tinyproxy carried both',
  );
  t.equal(await throughProxy(cluster, 0), 'through-the-agent');
  t.equal(await throughProxy(cluster, 1), 'through-the-agent');
});

t.test(
  'an agent that refuses the view and the describe request (as any stream not a client connection) keeps working with one tunnel and is sent no more views',
  async (t) => {
    const cluster = await startBalancedCluster(t, 1);
    if (!cluster) return;
    const registry = cluster.proxies[0]!.proxy.tunnels;
    // An agent that knows nothing of several proxies, reduced to what the proxy sees: one tunnel,
    // every stream served by serveAgentStream, which refuses any kind but a client connection with 400.
    const { opens } = await rawAgentSession(t, cluster.front, cluster.agentPair, cluster.ca);
    const kinds: string[] = [];
    const kindName = ['connect', 'describe', 'view'];
    opens.on('open', (stream, open) => {
      kinds.push(kindName[open.kind] ?? String(open.kind));
      serveAgentStream(stream, open, {
        allow: () => true,
        dialTimeoutMs: 5000,
        log: { debug() {}, warn() {} } as never,
        track: () => {},
      });
    });
    await registry.waitFor(AGENT);
    await until(() => kinds.length === 2, 'the view and the describe request arrived');
    t.same(kinds, ['view', 'describe'], 'the proxy sent its view and asked the agent to describe itself');
    t.same(
      registry.describedAgents().map((a) => [a.name, a.description]),
      [[AGENT, undefined]],
      'admitted undescribed',
    );
    t.equal(await throughProxy(cluster, 0), 'through-the-agent', 'clients reach the agent');
    t.same(kinds, ['view', 'describe', 'connect']);
    registry.setClusterView({ proxyId: cluster.ids[0]!, proxyIds: [cluster.ids[0]!, 'proxy-b'] });
    t.equal(await throughProxy(cluster, 0), 'through-the-agent');
    t.same(kinds, ['view', 'describe', 'connect', 'connect'], 'no second view to an agent that refused the first');
  },
);

t.test('a proxy that sends no view (on its own, or older): the agent keeps one tunnel whatever connection_count says', async (t) => {
  const side = await startProxySide([]);
  t.teardown(() => side.close());
  const agent = startAgent({
    proxy: `127.0.0.1:${side.port}`,
    name: 'lonely',
    ...agentCertificate('lonely'),
    ca: devCertificates().ca.cert,
    serverName: 'localhost',
    env: {},
    backoff: { initialMs: 50, maxMs: 400 },
    connectionCount: 3,
  });
  t.teardown(() => agent.close());
  t.same(await agent.waitConnected(), { via: 'direct', connections: 1 }, 'no proxy id: the proxy said nothing');
  t.equal(agent.proxies, undefined);
  t.equal(await dialsDuring(agent, 1000), 0, 'no second tunnel');
  t.equal(agent.dials, 1);
});

t.test('a new tunnel admitted on a proxy whose held tunnel went silent: the held one is dropped, the new one kept', async (t) => {
  const echo = await startTaggedTcpServer('fresh-path');
  t.teardown(() => {
    for (const s of echo.sockets) s.destroy();
    echo.server.close();
  });
  const target = `127.0.0.1:${echo.port}`;
  const side = await startProxySide([{ alpn: 'gate-redis', agent: 'stale', target }], {
    registry: { heartbeatIntervalMs: 60_000, heartbeatTimeoutMs: 1000 },
  });
  t.teardown(() => side.close());
  // The proxy says a second proxy exists, so the agent keeps dialling for it; every dial lands here.
  side.registry.setClusterView({ proxyId: 'only', proxyIds: ['only', 'elsewhere'] });
  const relay = await freezableRelay(t, side.port);
  const agent = startAgent({
    proxy: `127.0.0.1:${relay.port}`,
    name: 'stale',
    ...agentCertificate('stale'),
    ca: devCertificates().ca.cert,
    serverName: 'localhost',
    resources: [target],
    env: {},
    backoff: { initialMs: 50, maxMs: 400 },
    // No heartbeat is due for a minute on either side: only the probes can find the dead path.
    heartbeatIntervalMs: 60_000,
    heartbeatTimeoutMs: 1000,
    // A dial caught mid-handshake by the freeze is given up soon (one mid-admission, at the PING
    // deadline): the agent dials one tunnel at a time, and the next dial is what finds the dead path.
    dialTimeoutMs: 2000,
    connectionCount: 2,
  });
  t.teardown(() => agent.close());
  await agent.waitConnected();
  await until(() => agent.duplicates >= 1, 'a dial refused as a duplicate while the path is alive', 10_000);
  t.equal(agent.connections, 1, 'the live tunnel was kept');
  const lost = once(agent, 'disconnected');
  relay.freeze(); // the held tunnel's path goes silent, without a FIN
  const [{ reason }] = (await lost) as [{ reason: string }];
  t.match(reason, /no PING answer after a newer tunnel to the same proxy came up/, 'the held tunnel was dropped for its silence');
  t.same(tunnelIds(agent), ['only'], 'one tunnel on the proxy');
  t.equal(agent.connections, 2, 'the new one, which the proxy registered, was kept');
  const socket = await tlsClient(side.port, { servername: 'localhost', ALPNProtocols: ['gate-redis'] });
  t.equal((await readUntil(socket, (x) => x.includes('\n'))).trim(), 'fresh-path', 'clients use it');
  socket.destroy();
});

t.test('a malformed view is answered 400 and ignored by the agent; client streams still work', async (t) => {
  // A stand-in proxy: TLS with the tunnel ALPN, then a framed session over the agent's connection
  // that sends what the registry never would.
  const echo = await startTaggedTcpServer('still-served');
  t.teardown(() => {
    for (const s of echo.sockets) s.destroy();
    echo.server.close();
  });
  const target = `127.0.0.1:${echo.port}`;
  const { server: pair, ca } = devCertificates();
  const sessions: FramedSession[] = [];
  const tls = createTlsServer({ ...pair, ALPNProtocols: [ALPN_REVERSE_TUNNEL_FRAMED] }, (socket) => {
    sessions.push(new FramedSession(socket, { side: 'listener' }));
  });
  await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sessions) s.destroy();
    tls.close();
  });
  const agent = startAgent({
    proxy: `127.0.0.1:${(tls.address() as AddressInfo).port}`,
    name: 'picky',
    ...agentCertificate('picky'),
    ca: ca.cert,
    serverName: 'localhost',
    resources: [target],
    env: {},
    connectionCount: 2,
  });
  t.teardown(() => agent.close());
  await agent.waitConnected();
  const session = sessions[0]!;
  /** Sends a cluster view as the proxy does (its id in the OPEN, the ids as DATA): the agent's status. */
  const answer = async (proxyId: string, ids: string): Promise<number> => {
    const stream = session.open({ kind: StreamKind.CLUSTER_VIEW, target: proxyId, client: '' });
    stream.write(Buffer.from(ids, 'latin1'));
    stream.end();
    stream.resume();
    const [got] = (await once(stream, 'response')) as [AnswerPayload];
    return got.status;
  };
  t.equal(await answer('ok', 'ok'), 200, 'a good view: 200');
  t.same(agent.proxies, ['ok']);
  t.equal(await answer('bad|id', ''), 400, 'a malformed one: 400');
  t.equal(await answer('x', 'a,,b'), 400);
  t.same(agent.proxies, ['ok'], 'ignored: the list is unchanged');
  const stream = session.open({ kind: StreamKind.CONNECT, target, client: '' });
  const [got] = (await once(stream, 'response')) as [AnswerPayload];
  t.equal(got.status, 200, 'the tunnel still serves client streams');
  const duplex = tunnelDuplex(stream);
  duplex.on('error', () => {}); // reset if still open when the stand-in stops at teardown
  t.match(await readUntil(duplex, (x) => x.includes('\n')), /still-served/);
  duplex.end();
  t.equal(agent.streamsServed, 1, 'views are not counted as served streams');
});
