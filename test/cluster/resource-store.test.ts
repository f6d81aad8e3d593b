// The resources both stores hold (the maintenance window, roles, users, the rollout's state) and the lease: one contract, run against
// the memory store and a real redis-server. Revisions grow with every write; create is atomic.
import t, { type Test } from 'tap';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import { RedisRouteStore } from '../../lib/cluster/redis-route-store.js';
import { isResourceStore, type ResourceStore } from '../../lib/cluster/resource-store.js';
import { startRedis } from '../helpers/redis.js';

const write = (name: string, hour: number) => ({
  kind: 'cluster_maintenance_config',
  name,
  document: { kind: 'cluster_maintenance_config', spec: { agent_upgrades: { utc_start_hour: hour, weekdays: [] as string[] } } },
  updatedBy: 'tester',
  updatedAt: 1_700_000_000_000,
});

async function contract(t: Test, store: ResourceStore): Promise<void> {
  t.ok(isResourceStore(store));
  t.equal(await store.getResource('cluster_maintenance_config', 'w'), undefined, 'none at first');
  const first = await store.putResource(write('w', 2), 'create');
  t.match(first, {
    kind: 'cluster_maintenance_config',
    name: 'w',
    updatedBy: 'tester',
    document: { spec: { agent_upgrades: { utc_start_hour: 2 } } },
  });
  t.equal(await store.putResource(write('w', 3), 'create'), undefined, 'create over one that exists: nothing written');
  t.same((await store.getResource('cluster_maintenance_config', 'w'))?.document, write('w', 2).document, 'an empty list stays a list');
  const second = await store.putResource(write('w', 4), 'replace');
  t.ok(second!.revision > first!.revision, 'replace: a newer revision');
  t.equal((await store.getResource('cluster_maintenance_config', 'w'))?.revision, second!.revision);
  await store.putResource({ ...write('a', 1), kind: 'role' }, 'create');
  await store.putResource({ ...write('b', 1), kind: 'role' }, 'create');
  t.same(
    (await store.listResources('role')).map((r) => r.name),
    ['a', 'b'],
    'listed by kind, sorted',
  );
  const racing = await Promise.all([1, 2, 3, 4].map((h) => store.putResource({ ...write('race', h), kind: 'user' }, 'create')));
  t.equal(racing.filter((r) => r !== undefined).length, 1, 'of racing creates one wins');
  t.equal(await store.putResource({ ...write('nobody', 1), kind: 'user' }, 'update'), undefined, 'update of none: nothing written');
  t.equal(await store.getResource('user', 'nobody'), undefined);
  t.ok((await store.putResource({ ...write('a', 2), kind: 'role' }, 'update'))?.revision, 'update of one that exists');
  t.equal((await store.deleteResource('role', 'a'))?.name, 'a');
  t.equal(await store.deleteResource('role', 'a'), undefined, 'gone');
  t.same(
    (await store.listResources('role')).map((r) => r.name),
    ['b'],
  );

  // A compare-and-set: written only over the revision read (0: only when there is none).
  const state = { ...write('s', 1), kind: 'autoupdate_agent_rollout' };
  t.equal(await store.putResource(state, { revision: 7 }), undefined, 'revision 7 expected, none there: nothing written');
  const made = await store.putResource(state, { revision: 0 });
  t.ok(made, 'revision 0: written where there was none');
  t.equal(await store.putResource(state, { revision: 0 }), undefined, 'revision 0 again: one exists now');
  const next = await store.putResource(state, { revision: made!.revision });
  t.ok(next && next.revision > made!.revision, 'over the revision read: written');
  t.equal(await store.putResource(state, { revision: made!.revision }), undefined, 'over a stale revision: nothing written');
  t.equal((await store.getResource(state.kind, 's'))?.revision, next!.revision);

  // The lease: one holder at a time, renewed by its holder, free again at its expiry or release.
  t.equal(await store.holdLease('l', 'p1', 60_000), true, 'free: taken');
  t.equal(await store.holdLease('l', 'p2', 60_000), false, 'held by another');
  t.equal(await store.holdLease('l', 'p1', 200), true, 'its holder renews it (here shorter)');
  await new Promise((r) => setTimeout(r, 600));
  t.equal(await store.holdLease('l', 'p2', 60_000), true, 'expired: the other takes it');
  await store.releaseLease('l', 'p1');
  t.equal(await store.holdLease('l', 'p1', 60_000), false, 'a release by one that does not hold it changes nothing');
  await store.releaseLease('l', 'p2');
  t.equal(await store.holdLease('l', 'p1', 60_000), true, 'released: free');
}

t.test('memory', async (t) => contract(t, new MemoryRouteStore()));

t.test('redis', async (t) => {
  const redis = await startRedis(t);
  if (!redis) return;
  const store = new RedisRouteStore({ host: redis.host, port: redis.port, keyPrefix: 'resources:' });
  t.teardown(() => store.close());
  t.ok(await store.ready(5000), 'connected');
  await contract(t, store);
  const other = new RedisRouteStore({ host: redis.host, port: redis.port, keyPrefix: 'resources:' });
  t.teardown(() => other.close());
  await other.ready(5000);
  t.equal(
    (await other.getResource('cluster_maintenance_config', 'w'))?.document.kind,
    'cluster_maintenance_config',
    'another client of the same Redis reads it',
  );
});
