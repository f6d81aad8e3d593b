// Draining: agent edge holds tunnels to B and C; a client has a session open
// through B's tunnel. B drains: its presence says so, new tunnels and forwarded dials are refused
// with GATE_ERR_DRAINING, its agent is told GOAWAY, the open session keeps working and finishes,
// and new clients (on A) go through C. Then B closes within its grace period.
import t from 'tap';
import { once } from 'node:events';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { clusterClient as client, startPeeringCluster } from '../helpers/cluster.js';
import { echoOnce, until } from '../helpers/net.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

t.test('drain: presence marked, new tunnels and forwarded dials refused, open streams finish', async (t) => {
  const store = new MemoryRouteStore();
  const c = await startPeeringCluster(t, store);
  const a = await c.start();
  const b = await c.start();
  const third = await c.start();
  const onB = await c.agent(b);
  await c.agent(third);
  const refusals: GateError[] = [];
  onB.on('refused', (err: GateError) => refusals.push(err));

  const open = await client(b, c.ca.cert, 'gate-mongodb');
  t.equal(await echoOnce(open, 'before'), 'before', 'a session through B is open');

  await b.proxy.drain();
  t.ok(b.proxy.isDraining);
  const presence = (await store.proxies()).find((p) => p.id === b.proxy.proxyId);
  t.equal(presence?.draining, true, "B's presence says draining");
  t.equal(await echoOnce(open, 'during the drain'), 'during the drain', 'the open session keeps working');

  await until(
    () => refusals.some((e) => e.code === ErrorCodes.DRAINING),
    "the agent's new tunnel to B refused with GATE_ERR_DRAINING",
    10_000,
  );
  t.pass('the agent was told GOAWAY, dialled again and was refused: it belongs elsewhere');
  const local = await b.proxy.tunnels.open('edge', c.echo).catch((err: GateError) => err);
  t.equal((local as GateError).code, ErrorCodes.AGENT_OFFLINE, "B's own tunnel takes no new stream after its GOAWAY");
  await until(() => b.stats('multiplex').failures[ErrorCodes.DRAINING] !== undefined, 'the refusal recorded on B');

  const forwarded = await proxyParts(a.proxy)
    .peers.open({ id: b.proxy.proxyId, peerAddr: b.address('peer') }, 'edge', c.echo)
    .catch((err: GateError) => err);
  t.equal((forwarded as GateError).code, ErrorCodes.DRAINING, "B's peering server refuses new forwarded dials");

  for (let i = 0; i < 3; i++) {
    const s = await client(a, c.ca.cert, 'gate-mongodb');
    t.equal(await echoOnce(s, `new client ${i}`), `new client ${i}`, 'new clients on A go through C');
    s.destroy();
  }
  const onBNow = await client(b, c.ca.cert, 'gate-mongodb');
  t.equal(await echoOnce(onBNow, 'landed on B'), 'landed on B', 'a client still landing on B is served through C');
  onBNow.destroy();

  // Close with a grace period: the open session finishes it; then the client ends it cleanly.
  const closing = b.proxy.close({ graceMs: 10_000 });
  t.equal(await echoOnce(open, 'while closing'), 'while closing', 'the open session outlives the stop of accepting');
  open.end();
  await once(open, 'close');
  await closing;
  t.notOk(
    (await store.proxies()).some((p) => p.id === b.proxy.proxyId),
    'B left the store',
  );
  const after = await client(a, c.ca.cert, 'gate-mongodb');
  t.equal(await echoOnce(after, 'after'), 'after');
  after.destroy();
  const onC = await client(third, c.ca.cert, 'gate-mongodb');
  t.equal(await echoOnce(onC, 'on C'), 'on C', 'C serves as before');
  onC.destroy();
});
