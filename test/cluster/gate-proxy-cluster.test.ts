// GateProxy as a cluster member: two real proxies in one process share a
// MemoryRouteStore; a real agent joins one of them. Its presence, its tunnels with their
// generations, a reload's new channel fingerprint, and the withdrawal on close reach the store.
import t from 'tap';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { channelFingerprint } from '../../lib/cluster/channel-fingerprint.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import { parseConfig } from '../../lib/config/load.js';
import { joinedAgent } from '../helpers/cluster.js';
import { PROXY_VERSION, startGateProxy } from '../helpers/gate-proxy.js';
import { closeServer, startTaggedTcpServer, until } from '../helpers/net.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

t.test("two proxies on one store: presence, an agent's tunnel and its generations, reload, close", async (t) => {
  const tagged = await startTaggedTcpServer('behind-the-agent');
  t.teardown(() => closeServer(tagged.server));
  const target = `127.0.0.1:${tagged.port}`;
  const store = new MemoryRouteStore();
  const cluster = { presence_ttl: '1s' };
  const a = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { redis: `tunnel:edge/${target}` },
    proxyService: { peer_listen_addr: '127.0.0.1:0' },
    cluster,
    routeStore: store,
  });
  const b = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    proxyService: { peer_public_addr: 'proxy-b.internal' },
    cluster,
    routeStore: store,
  });

  t.match(a.proxy.proxyId, UUID, 'a random UUID');
  t.not(a.proxy.proxyId, b.proxy.proxyId);
  t.equal(a.proxy.routeStore, store, 'the store given is the one used');
  t.ok(proxyParts(a.proxy).cluster.registered && proxyParts(b.proxy).cluster.registered, 'both registered once started');
  const presence = new Map((await store.proxies()).map((p) => [p.id, p]));
  t.same(
    presence.get(a.proxy.proxyId),
    {
      id: a.proxy.proxyId,
      peerAddr: `127.0.0.1:${a.port('peer')}`,
      version: PROXY_VERSION,
      draining: false,
      channelFingerprint: channelFingerprint({}),
    },
    'a announces the peer listener it bound',
  );
  t.equal(presence.get(b.proxy.proxyId)?.peerAddr, 'proxy-b.internal:3021', 'b announces its peer_public_addr');
  t.same(
    proxyParts(b.proxy)
      .cluster.peers()
      .map((p) => p.id),
    [a.proxy.proxyId],
    'b saw a at its first refresh',
  );
  await until(() => proxyParts(a.proxy).cluster.peers().length === 1, 'a seeing b at its next refresh');

  // A real agent joins a and holds its tunnel there.
  const edge = await joinedAgent(t, a, 'edge', [target]);
  let agent = await edge.connect();
  t.same(await store.holders('edge'), [{ agent: 'edge', proxyId: a.proxy.proxyId, generation: 1 }], 'the tunnel is in the store');
  t.equal(proxyParts(a.proxy).cluster.generationOf('edge'), 1);

  await agent.close();
  await until(async () => (await store.holders('edge')).length === 0, 'the tunnel record dropped when the agent left');
  agent = await edge.connect();
  t.same(await store.holders('edge'), [{ agent: 'edge', proxyId: a.proxy.proxyId, generation: 2 }], 'its next tunnel is generation 2');

  // A reload that changes a's channels: the new fingerprint is announced and b reports the mismatch.
  const doc = parseYaml(a.yaml) as { proxy_service: Record<string, unknown> };
  doc.proxy_service.automatic_upgrades_channels = { 'stable/cloud': { static_version: 'v9.9.9' } };
  const config = parseConfig(stringifyYaml(doc)).config;
  await a.proxy.reload(config);
  const changed = channelFingerprint(config.proxy.automaticUpgradesChannels);
  t.equal((await store.proxies()).find((p) => p.id === a.proxy.proxyId)?.channelFingerprint, changed, 'announced at the reload');
  await until(() => proxyParts(b.proxy).cluster.channelMismatches().length === 1, 'b noticing the mismatch');
  t.same(proxyParts(b.proxy).cluster.channelMismatches(), [{ proxyId: a.proxy.proxyId, theirs: changed, ours: channelFingerprint({}) }]);

  // Close: a leaves the store at once, and its agent is no longer a candidate anywhere.
  await agent.close();
  await a.proxy.close({ graceMs: 0 });
  t.same(
    (await store.proxies()).map((p) => p.id),
    [b.proxy.proxyId],
    'a withdrew',
  );
  t.same(await store.holders('edge'), []);
  t.notOk(proxyParts(a.proxy).cluster.registered);
});

t.test('without a store given, cluster.store (memory by default) is used and closed with the proxy', async (t) => {
  const gate = await startGateProxy(t, { mode: 'multiplex', upstreams: {} });
  t.ok(gate.proxy.routeStore instanceof MemoryRouteStore);
  t.same(
    (await gate.proxy.routeStore.proxies()).map((p) => [p.id, p.peerAddr]),
    [[gate.proxy.proxyId, '']],
    'no peer listener: an empty peer address',
  );
  t.equal(gate.proxy.currentConfig.cluster.presenceTtlMs, 10_000);
});
