// The pure parts of agents on several proxies: the cluster view both sides agree on,
// how many tunnels an agent wants and which is a duplicate, and when it dials next.
import t from 'tap';
import { AgentPool, RedialSchedule } from '../../lib/tunnel/agent-pool.js';
import { normalizeClusterView, sameClusterView } from '../../lib/tunnel/cluster-view.js';
import { ErrorCodes, isGateError } from '../../lib/errors.js';
import { TunnelRegistry } from '../../lib/tunnel/registry.js';

t.test('cluster view: canonical form, bounds', async (t) => {
  t.same(
    normalizeClusterView({ proxyId: 'b', proxyIds: ['c', 'a', 'c'] }),
    { proxyId: 'b', proxyIds: ['a', 'b', 'c'] },
    'the sender is added; sorted; no repeats',
  );
  t.equal(normalizeClusterView({ proxyId: '', proxyIds: [] }), undefined, 'an empty id');
  t.equal(normalizeClusterView({ proxyId: 'a', proxyIds: ['b,c'] }), undefined, 'a comma would split on the wire');
  t.equal(normalizeClusterView({ proxyId: 'a', proxyIds: ['x\r\ny'] }), undefined, 'no control characters (ids are logged)');
  t.equal(normalizeClusterView({ proxyId: 'x'.repeat(129), proxyIds: [] }), undefined, 'ids are short');
  t.equal(
    normalizeClusterView({ proxyId: 'a', proxyIds: Array.from({ length: 1025 }, (_, i) => `p${i}`) }),
    undefined,
    'at most 1024 proxies',
  );
  const uuid = '6f1c1a52-8f0e-4c53-9d7a-0b9c4f7e2a11';
  const view = normalizeClusterView({ proxyId: uuid, proxyIds: ['0a8d5b8e-93f1-4a8e-8d1e-4b2a6c1d9e00'] })!;
  t.same(view.proxyIds, ['0a8d5b8e-93f1-4a8e-8d1e-4b2a6c1d9e00', uuid], 'UUIDs are ids');
  t.same(
    normalizeClusterView({ proxyId: 'solo', proxyIds: [] }),
    { proxyId: 'solo', proxyIds: ['solo'] },
    'an empty list still names the sender',
  );
  t.equal(normalizeClusterView({ proxyId: 'a', proxyIds: ['b', '', 'c'] }), undefined, 'an empty id in the list');
  t.ok(sameClusterView(view, normalizeClusterView({ proxyId: uuid, proxyIds: [...view.proxyIds].reverse() })));
  t.notOk(sameClusterView(view, normalizeClusterView({ proxyId: uuid, proxyIds: [] })));
  t.notOk(sameClusterView(view, undefined));
});

t.test('pool: one tunnel until a list comes, then one per proxy up to the count', async (t) => {
  const pool = new AgentPool(2);
  t.equal(pool.proxies, undefined);
  t.equal(pool.wanted(), 1, 'a proxy that sends no list (alone, or older): one tunnel, as before');
  t.ok(pool.short([]));
  t.notOk(pool.short([{ proxyId: undefined }]), 'one tunnel of unknown proxy is enough then');
  t.same(pool.learn({ proxyId: 'a', proxyIds: ['a'] }), []);
  t.equal(pool.wanted(), 1, 'one proxy: one tunnel although the count is 2');
  t.notOk(pool.short([{ proxyId: 'a' }]), 'no dialling for a second proxy that does not exist');
  pool.learn({ proxyId: 'a', proxyIds: ['a', 'b', 'c'] });
  t.equal(pool.wanted(), 2, 'three proxies: the count');
  t.ok(pool.short([{ proxyId: 'a' }]));
  t.notOk(pool.short([{ proxyId: 'a' }, { proxyId: 'b' }]));
  t.notOk(pool.short([{ proxyId: 'a' }, { proxyId: undefined }]), 'a tunnel whose proxy is not known yet counts');
  t.same(pool.learn({ proxyId: 'b', proxyIds: ['a', 'b'] }), ['c'], 'c forgotten');
  t.same(pool.proxies, ['a', 'b']);
  t.ok(pool.short([{ proxyId: 'a' }, { proxyId: 'c' }]), 'a tunnel still open to a forgotten proxy does not count');
  t.equal(pool.counted([{ proxyId: 'a' }, { proxyId: 'c' }]), 1);
});

t.test('pool: duplicates compare known proxies only', async (t) => {
  const pool = new AgentPool(3);
  const a1 = { proxyId: 'a' };
  const a2 = { proxyId: 'a' };
  const b = { proxyId: 'b' };
  const unknown = { proxyId: undefined };
  t.equal(pool.duplicateOf(a2, [a1, b]), a1);
  t.equal(pool.duplicateOf(a1, [a1, b]), undefined, 'a tunnel is no duplicate of itself');
  t.equal(pool.duplicateOf(b, [a1]), undefined);
  t.equal(pool.duplicateOf(unknown, [unknown, { proxyId: undefined }]), undefined, 'proxies that say nothing are never duplicates');
});

t.test('pool: the count is a whole number of at least one', async (t) => {
  for (const bad of [0, -1, 1.5, Number.NaN]) {
    let thrown: unknown;
    try {
      new AgentPool(bad);
    } catch (err) {
      thrown = err;
    }
    t.ok(isGateError(thrown, ErrorCodes.INVALID_ARGUMENT), `${bad}: GATE_ERR_INVALID_ARGUMENT`);
  }
  t.equal(new AgentPool().connectionCount, 2, 'default 2');
});

t.test('redial schedule: failures grow, duplicates grow apart and reset failures, a new proxy resets both', async (t) => {
  const ceiling = 0.999999; // random() just under 1: each delay is (almost) its ceiling
  const s = new RedialSchedule({ initialMs: 100, maxMs: 1600 }, 10_000, () => ceiling);
  const near = (ms: number, expected: number): boolean => ms === Math.floor(expected * ceiling);
  t.ok(near(s.afterDial('failed'), 100));
  t.ok(near(s.afterDial('failed'), 200));
  t.ok(near(s.afterDial('failed'), 400));
  t.ok(near(s.afterDial('duplicate'), 100), 'a duplicate starts its own growth');
  t.ok(near(s.afterDial('failed'), 100), 'and the path is proven: failures start over');
  t.ok(near(s.afterDial('duplicate'), 200), 'duplicates keep growing while they repeat');
  t.ok(near(s.afterDial('duplicate'), 400));
  t.ok(near(s.afterDial('added'), 100), 'a new proxy: the next dial after a short jitter');
  t.ok(near(s.afterDial('duplicate'), 100), 'duplicates start over too');
  for (let i = 0; i < 10; i++) s.afterDial('failed');
  t.ok(near(s.afterDial('failed'), 1600), 'capped');
  t.ok(near(s.afterTunnelEnd(60_000), 100), 'a tunnel that was up long enough resets the failures');
  t.ok(near(s.afterTunnelEnd(10), 200), 'one that ended at once counts as a failure');
  const zero = new RedialSchedule({ initialMs: 100, maxMs: 1600 }, 10_000, () => 0);
  t.equal(zero.afterDial('failed'), 0, 'full jitter reaches zero');
});

t.test('registry: the view it tells agents is checked and kept in canonical form', async (t) => {
  const registry = new TunnelRegistry();
  t.equal(registry.clusterView, undefined, 'none until set: agents are told nothing');
  registry.setClusterView({ proxyId: 'p2', proxyIds: ['p1'] });
  t.same(registry.clusterView, { proxyId: 'p2', proxyIds: ['p1', 'p2'] }, 'itself included, sorted');
  const copy = registry.clusterView!;
  copy.proxyIds.push('tampered');
  t.same(registry.clusterView, { proxyId: 'p2', proxyIds: ['p1', 'p2'] }, 'a copy is handed out');
  for (const bad of [
    { proxyId: '', proxyIds: [] },
    { proxyId: 'p1', proxyIds: ['has space'] },
  ]) {
    let thrown: unknown;
    try {
      registry.setClusterView(bad);
    } catch (err) {
      thrown = err;
    }
    t.ok(isGateError(thrown, ErrorCodes.INVALID_ARGUMENT), `refused: ${JSON.stringify(bad)}`);
  }
  t.same(registry.clusterView, { proxyId: 'p2', proxyIds: ['p1', 'p2'] }, 'a refused view changes nothing');
  registry.close();
});
