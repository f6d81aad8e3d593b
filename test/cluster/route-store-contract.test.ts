// One contract, two stores: the same cases run against MemoryRouteStore and the
// Redis store on a real redis-server. Expiry, generation ordering, presence-filtered holders and
// the draining flag mean the same thing whichever store a cluster runs on.
import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import { RedisRouteStore } from '../../lib/cluster/redis-route-store.js';
import type { InventoryRecord, ProxyPresence, RouteStore } from '../../lib/cluster/route-store.js';
import { startRedis, type RunningRedis } from '../helpers/redis.js';

/** Long enough that nothing expires while a case runs, however loaded the machine. */
const LONG = 60_000;
/** Short enough to wait out; cases wait several times this before looking. */
const SHORT = 150;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function presence(id: string, extra: Partial<ProxyPresence> = {}): ProxyPresence {
  return { id, peerAddr: `${id}.internal:3021`, version: '1.2.3', draining: false, channelFingerprint: 'sha256:00', ...extra };
}

type Cases = Array<[string, (t: Test, store: RouteStore) => Promise<void>]>;

const cases: Cases = [
  [
    'presence round-trips every field; draining is updated by the next announce; withdraw removes it',
    async (t, store) => {
      await store.announce(presence('p1'), LONG);
      await store.announce(presence('p2', { peerAddr: '', version: '2.0.0-rc.1', channelFingerprint: 'sha256:ff' }), LONG);
      const sorted = async () => (await store.proxies()).sort((a, b) => a.id.localeCompare(b.id));
      t.same(await sorted(), [presence('p1'), presence('p2', { peerAddr: '', version: '2.0.0-rc.1', channelFingerprint: 'sha256:ff' })]);
      await store.announce(presence('p1', { draining: true }), LONG);
      t.same(
        (await sorted()).map((p) => [p.id, p.draining]),
        [
          ['p1', true],
          ['p2', false],
        ],
        'the draining flag',
      );
      await store.withdraw('p1');
      t.same(
        (await store.proxies()).map((p) => p.id),
        ['p2'],
      );
      await store.withdraw('never-there');
    },
  ],
  [
    'expiry: presence and holdings are gone once their TTL has passed',
    async (t, store) => {
      await store.announce(presence('short'), SHORT);
      await store.announce(presence('long'), LONG);
      await store.holdTunnel({ agent: 'db', proxyId: 'long', generation: 1 }, SHORT);
      await store.holdTunnel({ agent: 'web', proxyId: 'short', generation: 1 }, LONG);
      await sleep(SHORT * 3);
      t.same(
        (await store.proxies()).map((p) => p.id),
        ['long'],
        'the short presence expired',
      );
      t.same(await store.holders('db'), [], 'the short holding expired though its proxy is live');
      t.same(await store.holders('web'), [], 'a live holding of an expired proxy is no candidate');
      await store.announce(presence('short'), LONG);
      t.same(await store.holders('web'), [{ agent: 'web', proxyId: 'short', generation: 1 }], 'it is again once the proxy announces');
    },
  ],
  [
    'generations: a late drop cannot remove a newer tunnel, an older refresh cannot overwrite it',
    async (t, store) => {
      await store.announce(presence('p'), LONG);
      await store.holdTunnel({ agent: 'a', proxyId: 'p', generation: 2 }, LONG);
      await store.holdTunnel({ agent: 'a', proxyId: 'p', generation: 1 }, LONG);
      t.same(await store.holders('a'), [{ agent: 'a', proxyId: 'p', generation: 2 }], 'generation 1 did not overwrite 2');
      t.equal(await store.dropTunnel({ agent: 'a', proxyId: 'p', generation: 1 }), false, 'dropping generation 1 removes nothing');
      t.same(await store.holders('a'), [{ agent: 'a', proxyId: 'p', generation: 2 }]);
      await store.holdTunnel({ agent: 'a', proxyId: 'p', generation: 2 }, LONG);
      t.same(await store.holders('a'), [{ agent: 'a', proxyId: 'p', generation: 2 }], 'the same generation refreshes');
      await store.holdTunnel({ agent: 'a', proxyId: 'p', generation: 10 }, LONG);
      t.same(
        await store.holders('a'),
        [{ agent: 'a', proxyId: 'p', generation: 10 }],
        'a newer one replaces it (10 > 2 as numbers, not text)',
      );
      t.equal(await store.dropTunnel({ agent: 'a', proxyId: 'p', generation: 10 }), true);
      t.same(await store.holders('a'), []);
      t.equal(await store.dropTunnel({ agent: 'a', proxyId: 'p', generation: 10 }), false, 'a second drop finds nothing');
      t.equal(await store.dropTunnel({ agent: 'nobody', proxyId: 'p', generation: 1 }), false);
    },
  ],
  [
    'holders: only proxies whose presence is live, draining ones included; per agent',
    async (t, store) => {
      await store.announce(presence('live'), LONG);
      await store.announce(presence('draining', { draining: true }), LONG);
      await store.announce(presence('withdrawn'), LONG);
      await store.withdraw('withdrawn');
      for (const proxyId of ['live', 'draining', 'withdrawn', 'never-announced'])
        await store.holdTunnel({ agent: 'db', proxyId, generation: 3 }, LONG);
      await store.holdTunnel({ agent: 'other', proxyId: 'live', generation: 1 }, LONG);
      const holders = (await store.holders('db')).sort((a, b) => a.proxyId.localeCompare(b.proxyId));
      t.same(holders, [
        { agent: 'db', proxyId: 'draining', generation: 3 },
        { agent: 'db', proxyId: 'live', generation: 3 },
      ]);
      t.same(await store.holders('other'), [{ agent: 'other', proxyId: 'live', generation: 1 }]);
      t.same(await store.holders('unknown'), []);
    },
  ],
  [
    "inventory records: one per server ID and proxy, only live proxies', with generations and expiry",
    async (t, store) => {
      const a = randomUUID();
      const b = randomUUID();
      const record = (serverId: string, proxyId: string, generation: number, extra: Partial<InventoryRecord> = {}): InventoryRecord => ({
        serverId,
        hostname: 'db-1',
        services: [{ kind: 'db', name: 'orders' }],
        version: '3.1.0',
        upgrader: 'unit',
        updateGroup: 'default',
        agent: 'edge',
        proxyId,
        generation,
        since: 1000,
        ...extra,
      });
      const sorted = async () =>
        (await store.agentRecords()).sort((x, y) => `${x.serverId}${x.proxyId}`.localeCompare(`${y.serverId}${y.proxyId}`));
      await store.announce(presence('p1'), LONG);
      await store.announce(presence('p2'), LONG);
      await store.putAgentRecord(record(a, 'p1', 2), LONG);
      await store.putAgentRecord(record(a, 'p2', 1, { upgrader: 'none' }), LONG);
      await store.putAgentRecord(record(b, 'gone', 1), LONG);
      t.same(
        await sorted(),
        [record(a, 'p1', 2), record(a, 'p2', 1, { upgrader: 'none' })].sort((x, y) => x.proxyId.localeCompare(y.proxyId)),
        'every field round-trips; a proxy without presence is left out',
      );
      await store.putAgentRecord(record(a, 'p1', 1, { hostname: 'stale' }), LONG);
      t.equal((await sorted()).find((r) => r.proxyId === 'p1')?.hostname, 'db-1', 'an older generation does not overwrite a newer one');
      await store.putAgentRecord(record(a, 'p1', 2, { services: [] }), LONG);
      t.same((await sorted()).find((r) => r.proxyId === 'p1')?.services, [], 'the same generation updates it');
      t.equal(
        await store.dropAgentRecord({ serverId: a, proxyId: 'p1', generation: 1 }),
        false,
        'a late drop of generation 1 removes nothing',
      );
      t.equal(await store.dropAgentRecord({ serverId: a, proxyId: 'p1', generation: 2 }), true);
      t.same(
        (await store.agentRecords()).map((r) => r.proxyId),
        ['p2'],
      );
      await store.putAgentRecord(record(b, 'p1', 1), SHORT);
      await sleep(SHORT * 3);
      t.same(
        (await store.agentRecords()).map((r) => r.serverId),
        [a],
        'an expired record is gone',
      );
      await store.withdraw('p2');
      t.same(await store.agentRecords(), [], "a withdrawn proxy's records are no longer listed");
    },
  ],
];

for (const [name, run] of cases) {
  t.test(`memory: ${name}`, async (t) => run(t, new MemoryRouteStore()));
}

t.test('redis', async (t) => {
  const redis = await startRedis(t);
  if (!redis) return;
  for (const [name, run] of cases) {
    await t.test(name, async (t) => {
      // A prefix per case: one redis-server, cases that cannot see each other's records.
      const store = await redisStore(t, redis, `test-${randomUUID()}:`);
      await run(t, store);
    });
  }
  await t.test('prefixes isolate stores on one server', async (t) => {
    const a = await redisStore(t, redis, 'a:');
    const b = await redisStore(t, redis, 'b:');
    await a.announce(presence('in-a'), LONG);
    await a.holdTunnel({ agent: 'db', proxyId: 'in-a', generation: 1 }, LONG);
    t.same(await b.proxies(), []);
    t.same(await b.holders('db'), []);
    t.same(
      (await a.proxies()).map((p) => p.id),
      ['in-a'],
    );
  });
});

/** A connected store: commands sent before the connection is up fail at once (no offline queue). */
async function redisStore(t: Test, redis: RunningRedis, keyPrefix: string): Promise<RedisRouteStore> {
  const store = new RedisRouteStore({ host: redis.host, port: redis.port, keyPrefix });
  t.teardown(() => store.close());
  t.ok(await store.ready(5000), 'connected');
  return store;
}
