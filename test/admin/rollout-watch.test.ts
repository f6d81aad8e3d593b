// The watch every proxy runs, on a real memory store (a proxy alone holds the lease itself): find
// answers from memory, the controller's step written over the revision it read, an operator's
// command written meanwhile never overwritten, two watches on one store and one lease holder.
import t from 'tap';
import { readManifests } from '../../lib/admin/manifest.js';
import { RolloutWatch } from '../../lib/admin/rollout-watch.js';
import { AUTOUPDATE_ROLLOUT_KIND, AUTOUPDATE_ROLLOUT_NAME } from '../../lib/admin/resource-kinds.js';
import { applyCommand, rolloutDocument, rolloutStateOf } from '../../lib/admin/rollout-state.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';

const HOUR = new Date().getUTCHours();
const MANIFESTS = `kind: autoupdate_config
spec:
  agents:
    mode: enabled
    canary_timeout: 1h
    schedules:
      regular:
        - name: dev
          start_hour: ${HOUR}
          canary_count: 1
        - name: prod
          start_hour: ${HOUR}
---
kind: autoupdate_version
spec:
  agents:
    start_version: 0.1.0
    target_version: 0.2.0
`;
const id = (n: number): string => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

async function storeWithFleet(): Promise<MemoryRouteStore> {
  const store = new MemoryRouteStore();
  await store.announce({ id: 'p1', peerAddr: '', version: '0.1.0', draining: false, channelFingerprint: 'sha256:00' }, 60_000);
  for (const [n, group] of [
    [1, 'dev'],
    [2, 'dev'],
    [3, 'prod'],
  ] as const)
    await store.putAgentRecord(
      {
        serverId: id(n),
        hostname: 'h',
        services: [],
        version: '0.1.0',
        upgrader: 'unit',
        updateGroup: group,
        agent: `a${n}`,
        proxyId: 'p1',
        generation: 1,
        since: 0,
      },
      60_000,
    );
  return store;
}

async function createRollout(store: MemoryRouteStore): Promise<void> {
  for (const m of readManifests(MANIFESTS).manifests)
    await store.putResource({ kind: m.kind, name: m.name, document: m.document, updatedBy: 'test', updatedAt: Date.now() }, 'create');
}

t.test('a proxy alone: unmanaged until the manifests exist, then its step tells dev its canary', async (t) => {
  const store = await storeWithFleet();
  const watch = new RolloutWatch({ store: () => store, proxyId: 'p1', stepMs: 0 });
  t.teardown(() => watch.close());
  await watch.poll();
  t.same(watch.find(id(1), 'dev'), { managed: false }, 'no autoupdate_config: unmanaged');
  await createRollout(store);
  await watch.poll();
  t.ok(watch.leaseHolder, 'alone, it holds the lease');
  const canary = watch.current()!.groups[0]!.canaries[0]!;
  t.equal(canary.serverId, id(1), 'the first connected dev agent is the canary');
  t.same(watch.find(id(1), 'dev'), {
    managed: true,
    agent_version: '0.2.0',
    agent_auto_update: true,
    reason: 'canary of group dev: update to 0.2.0',
  });
  t.equal(watch.find(id(3), 'prod').reason, 'waiting for group dev');
  const stored = await store.getResource(AUTOUPDATE_ROLLOUT_KIND, AUTOUPDATE_ROLLOUT_NAME);
  t.equal(stored?.updatedBy, 'rollout-controller', 'the state is written to the store');
  await watch.poll();
  t.equal(
    (await store.getResource(AUTOUPDATE_ROLLOUT_KIND, AUTOUPDATE_ROLLOUT_NAME))?.revision,
    stored?.revision,
    'nothing new: nothing written',
  );
});

t.test("an operator's command written between a read and a write is kept; a second watch never drives", async (t) => {
  const store = await storeWithFleet();
  await createRollout(store);
  const first = new RolloutWatch({ store: () => store, proxyId: 'p1', stepMs: 0 });
  const second = new RolloutWatch({ store: () => store, proxyId: 'p2', stepMs: 0 });
  t.teardown(() => Promise.all([first.close(), second.close()]));
  await first.poll();
  await second.poll();
  t.ok(first.leaseHolder);
  t.notOk(second.leaseHolder, 'one lease holder');
  t.same(second.find(id(1), 'dev'), first.find(id(1), 'dev'), 'both answer alike, from the store');

  const read = await store.getResource(AUTOUPDATE_ROLLOUT_KIND, AUTOUPDATE_ROLLOUT_NAME);
  const rolled = applyCommand(rolloutStateOf(read!.document)!, { verb: 'rollback' }, 'alice', Date.now());
  await store.putResource(
    {
      kind: AUTOUPDATE_ROLLOUT_KIND,
      name: AUTOUPDATE_ROLLOUT_NAME,
      document: rolloutDocument(rolled, AUTOUPDATE_ROLLOUT_NAME, AUTOUPDATE_ROLLOUT_KIND),
      updatedBy: 'alice',
      updatedAt: Date.now(),
    },
    { revision: read!.revision },
  );
  await first.poll();
  await second.poll();
  t.equal(first.current()!.groups[0]!.state, 'rolledback', "the controller continues from the operator's write");
  t.same(second.find(id(1), 'dev'), { managed: true, agent_version: '0.1.0', agent_auto_update: true, reason: 'rolled back' });

  await first.close();
  await second.poll();
  t.ok(second.leaseHolder, 'the first closed and released the lease: the second drives at its next step');
});
