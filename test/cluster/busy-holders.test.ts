// The stream cap is per tunnel (issue 37): a dial that finds this proxy's tunnel of an agent full
// (GATE_ERR_AGENT_BUSY) goes to the agent's tunnel on another proxy before the client is refused,
// and is refused busy only when every holder is full. Two real proxy sides (multiplexer, tunnel
// route, registry), each with a real agent of the same name (one agent, two tunnels), a
// ClusterDialer over a MemoryRouteStore naming the second as a holder; the hop to the second
// proxy is its registry's own open (the peering hop itself is test/cluster/cluster-dialer.test.ts's).
import t, { type Test } from 'tap';
import { EventEmitter } from 'node:events';
import { ClusterDialer } from '../../lib/cluster/cluster-dialer.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import { ErrorCodes } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { releaseTunnelStream, type TunnelStream } from '../../lib/tunnel/tunnel-stream.js';
import { clientStreamCap } from '../../lib/tunnel/settings.js';
import { startEchoServer } from '../helpers/echo-servers.js';
import { agentCertificate, type ProxySide, startProxySide } from '../helpers/tunnel-rig.js';

const LIMIT = 8;
const CAP = clientStreamCap(LIMIT);

async function side(t: Test, target: string): Promise<ProxySide> {
  const proxy = await startProxySide([]);
  t.teardown(() => proxy.close());
  const agent = startAgent({
    proxy: `127.0.0.1:${proxy.port}`,
    name: 'edge',
    ...agentCertificate('edge'),
    ca: devCertificates().ca.cert,
    serverName: 'localhost',
    env: {},
    resources: [target],
    maxStreams: LIMIT,
  });
  t.teardown(() => agent.close());
  await agent.waitConnected(10_000);
  return proxy;
}

t.test('a full tunnel sends the dial to the agent’s tunnel on another proxy; all full is GATE_ERR_AGENT_BUSY', async (t) => {
  const echo = await startEchoServer(t);
  const [one, two] = [await side(t, echo.address), await side(t, echo.address)];
  const store = new MemoryRouteStore();
  await store.announce({ id: 'p2', peerAddr: '127.0.0.1:1', version: '1.0.0', draining: false, channelFingerprint: 'x' }, 60_000);
  await store.holdTunnel({ agent: 'edge', proxyId: 'p2', generation: 1 }, 60_000);
  const member = Object.assign(new EventEmitter(), { proxyId: 'p1' });
  const dialer = new ClusterDialer({
    registry: one.registry,
    cluster: { store, member, peers: { open: (_peer, agent, target, options) => two.registry.open(agent, target, options) } },
  });
  t.teardown(() => dialer.close());
  const held: TunnelStream[] = [];
  t.teardown(() => {
    for (const s of held) releaseTunnelStream(s);
  });

  for (let i = 0; i < CAP; i++) held.push(await dialer.open('edge', echo.address));
  t.equal(one.registry.streamStats.opened, CAP, 'the first streams go through this proxy’s tunnel');
  t.equal(two.registry.streamStats.opened, 0);

  held.push(await dialer.open('edge', echo.address));
  t.equal(one.registry.streamStats.busy, 1, 'this proxy’s tunnel was full');
  t.equal(two.registry.streamStats.opened, 1, 'the dial went to the agent’s other tunnel');

  for (let i = 1; i < CAP; i++) held.push(await dialer.open('edge', echo.address));
  t.equal(two.registry.streamStats.opened, CAP, 'the other tunnel fills to its own cap');
  await t.rejects(dialer.open('edge', echo.address), { code: ErrorCodes.AGENT_BUSY }, 'both full: the client is refused busy');
  t.equal(one.registry.streamStats.reset + two.registry.streamStats.reset, 0, 'neither agent refused an open');
  t.same([one.registry.agents(), two.registry.agents()], [['edge'], ['edge']], 'both tunnels up');
});
