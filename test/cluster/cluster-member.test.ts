// ClusterMember over the in-memory store: presence, tunnel holdings with
// generations, re-registration after the store lost everything, draining, withdrawal, and channel
// mismatches. The registry here is an EventEmitter with the TunnelRegistry's two events: the real
// registry with real agents is in gate-proxy-cluster.test.ts.
import t from 'tap';
import { EventEmitter, once } from 'node:events';
import { ClusterMember, type ChannelMismatch } from '../../lib/cluster/cluster-member.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import type { InventoryRecord, ProxyPresence, RouteStore, TunnelHolding } from '../../lib/cluster/route-store.js';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { captureLogs } from '../hardening/log-capture.js';
import { until } from '../helpers/net.js';

class Agents extends EventEmitter {
  readonly connected = new Set<string>();
  agents(): string[] {
    return [...this.connected];
  }
  connect(name: string): void {
    this.connected.add(name);
    this.emit('agent-connected', name);
  }
  disconnect(name: string): void {
    this.connected.delete(name);
    this.emit('agent-disconnected', name, 'test');
  }
}

/**
 * A store whose backing MemoryRouteStore can be replaced by an empty one (what a Redis restart
 * without persistence does to the data) or made to fail (Redis unreachable).
 */
class OutageStore implements RouteStore {
  down = false;
  constructor(public inner: MemoryRouteStore) {}
  private async call<T>(f: () => Promise<T>): Promise<T> {
    if (this.down) throw new Error('connection refused');
    return f();
  }
  announce(p: ProxyPresence, ttl: number) {
    return this.call(() => this.inner.announce(p, ttl));
  }
  withdraw(id: string) {
    return this.call(() => this.inner.withdraw(id));
  }
  proxies() {
    return this.call(() => this.inner.proxies());
  }
  holdTunnel(h: TunnelHolding, ttl: number) {
    return this.call(() => this.inner.holdTunnel(h, ttl));
  }
  dropTunnel(h: TunnelHolding) {
    return this.call(() => this.inner.dropTunnel(h));
  }
  holders(agent: string) {
    return this.call(() => this.inner.holders(agent));
  }
  putAgentRecord(r: InventoryRecord, ttl: number) {
    return this.call(() => this.inner.putAgentRecord(r, ttl));
  }
  dropAgentRecord(key: { serverId: string; proxyId: string; generation: number }) {
    return this.call(() => this.inner.dropAgentRecord(key));
  }
  agentRecords() {
    return this.call(() => this.inner.agentRecords());
  }
  async close() {}
}

function presence(id: string, channelFingerprint = 'sha256:same'): Omit<ProxyPresence, 'draining'> {
  return { id, peerAddr: `${id}.example:3021`, version: '1.0.0', channelFingerprint };
}

function member(t: { teardown(fn: () => unknown): unknown }, options: ConstructorParameters<typeof ClusterMember>[0]): ClusterMember {
  const m = new ClusterMember(options);
  t.teardown(() => m.close());
  return m;
}

t.test('presence: announced at start, registered while fresh, peers are the others', async (t) => {
  let now = 1_000_000;
  const store = new MemoryRouteStore(() => now);
  const a = member(t, { store, registry: new Agents(), presence: presence('a'), ttlMs: 10_000, now: () => now });
  t.notOk(a.registered, 'not registered before start');
  const changed = once(a, 'proxies-changed');
  await a.start();
  t.ok(a.registered);
  t.same(
    ((await changed) as [ProxyPresence[]])[0].map((p) => p.id),
    ['a'],
    'proxies-changed includes this proxy',
  );
  t.same(await store.proxies(), [{ ...presence('a'), draining: false }]);
  t.same(a.peers(), []);

  const b = member(t, { store, registry: new Agents(), presence: presence('b'), ttlMs: 10_000, now: () => now });
  await b.start();
  t.same(
    b.peers().map((p) => p.id),
    ['a'],
    'b sees a',
  );
  t.same(
    b.proxies().map((p) => p.id),
    ['a', 'b'],
  );

  // Nothing refreshes on this clock (the timer runs every 3.3 s of real time): past the TTL the
  // announce is stale and both are gone from the store, as a crashed proxy would be.
  now += 10_000;
  t.notOk(a.registered, 'not registered once the last announce is a TTL old');
  t.same(await store.proxies(), [], 'expired presence is gone');
});

t.test('holdings: one generation per connection; a late drop cannot remove a newer tunnel', async (t) => {
  const store = new MemoryRouteStore();
  const agents = new Agents();
  agents.connect('early'); // connected before the member started: recorded at start
  const a = member(t, { store, registry: agents, presence: presence('a'), ttlMs: 10_000 });
  await a.start();
  t.same(await store.holders('early'), [{ agent: 'early', proxyId: 'a', generation: 1 }]);

  agents.connect('db');
  t.equal(a.generationOf('db'), 1);
  t.same(await store.holders('db'), [{ agent: 'db', proxyId: 'a', generation: 1 }]);
  agents.disconnect('db');
  t.equal(a.generationOf('db'), undefined);
  t.same(await store.holders('db'), [], 'a disconnect drops the record');
  agents.connect('db');
  t.equal(a.generationOf('db'), 2, 'a reconnect is a new generation');
  t.equal(await store.dropTunnel({ agent: 'db', proxyId: 'a', generation: 1 }), false, 'the late drop of generation 1 removes nothing');
  await store.holdTunnel({ agent: 'db', proxyId: 'a', generation: 1 }, 10_000);
  t.same(await store.holders('db'), [{ agent: 'db', proxyId: 'a', generation: 2 }], 'an old refresh does not overwrite generation 2');

  // Another proxy's view: holders of a withdrawn proxy are not candidates.
  await a.close();
  t.same(await store.proxies(), [], 'stop withdraws the presence');
  t.same(await store.holders('db'), [], 'and its tunnels are not candidates any more');
  agents.connect('late');
  t.same(await store.holders('late'), [], 'a stopped member records nothing');
  t.notOk(a.registered);
});

t.test('draining is announced at once', async (t) => {
  const store = new MemoryRouteStore();
  const a = member(t, { store, registry: new Agents(), presence: presence('a'), ttlMs: 10_000 });
  await a.start();
  await a.setDraining(true);
  t.equal(a.isDraining, true);
  t.same(
    (await store.proxies()).map((p) => p.draining),
    [true],
  );
  await a.setDraining(false);
  t.same(
    (await store.proxies()).map((p) => p.draining),
    [false],
  );
});

t.test('store outage: errors carry GATE_ERR_STORE_UNAVAILABLE, one log line, and everything is re-registered by itself', async (t) => {
  const store = new OutageStore(new MemoryRouteStore());
  const agents = new Agents();
  const { logger, lines } = captureLogs();
  const a = member(t, { store, registry: agents, presence: presence('a'), ttlMs: 300, logger });
  await a.start();
  agents.connect('db');
  await until(async () => (await store.holders('db')).length === 1, 'the holding');

  store.down = true;
  const errors: GateError[] = [];
  const operations = new Set<string>();
  a.on('store-error', (err: GateError, operation: string) => {
    errors.push(err);
    operations.add(operation);
  });
  agents.connect('other'); // recorded locally while the store is down
  await until(async () => errors.length >= 3, 'several failed refreshes');
  t.ok(
    errors.every((e) => e.code === ErrorCodes.STORE_UNAVAILABLE),
    'every failure has the code',
  );
  t.ok(operations.has('holdTunnel') && operations.has('announce'), `each names its operation: ${[...operations].join(', ')}`);
  t.equal(lines.filter((l) => l.code === ErrorCodes.STORE_UNAVAILABLE).length, 1, 'one log line per outage, not one per refresh');
  await until(async () => !a.registered, 'registered turning false after a TTL without an announce');

  // The store comes back empty (a Redis restart without persistence).
  store.inner = new MemoryRouteStore();
  let recovered = 0;
  a.on('store-recovered', () => recovered++);
  store.down = false;
  // Polled rather than awaited with once(): the member's timer is unref'd (it never keeps a process alive).
  await until(async () => recovered === 1, 'store-recovered');
  t.ok(a.registered, 'registered again');
  t.same(
    (await store.proxies()).map((p) => p.id),
    ['a'],
    'presence re-announced',
  );
  t.same(await store.holders('db'), [{ agent: 'db', proxyId: 'a', generation: 1 }], 'the tunnel held before the outage is back');
  t.same(await store.holders('other'), [{ agent: 'other', proxyId: 'a', generation: 1 }], 'and the one that connected during it');
  t.ok(
    lines.some((l) => /reachable again/.test(l.msg)),
    'the recovery is logged',
  );
});

t.test('stop never throws when the store is down', async (t) => {
  const store = new OutageStore(new MemoryRouteStore());
  const a = new ClusterMember({ store, registry: new Agents(), presence: presence('a'), ttlMs: 10_000 });
  await a.start();
  store.down = true;
  await t.resolves(a.close());
});

t.test('channel mismatch: one error per distinct mismatch naming both proxies and fingerprints', async (t) => {
  const store = new MemoryRouteStore();
  const { logger, lines } = captureLogs();
  // A TTL no test outlives, and refreshes driven by hand: with a short one, a loaded machine that
  // stalled past it would let b's presence expire between two of a's reads, and its return count
  // as a new mismatch. The timer runs the same refresh().
  const a = member(t, { store, registry: new Agents(), presence: presence('a', 'sha256:aaa'), ttlMs: 600_000, logger });
  const seen: ChannelMismatch[] = [];
  a.on('channel-mismatch', (m: ChannelMismatch) => seen.push(m));
  await a.start();
  const b = member(t, { store, registry: new Agents(), presence: presence('b', 'sha256:bbb'), ttlMs: 600_000 });
  await b.start();
  await a.refresh();
  t.equal(seen.length, 1, 'a noticed b');
  for (let i = 0; i < 3; i++) await a.refresh();
  t.same(seen, [{ proxyId: 'b', theirs: 'sha256:bbb', ours: 'sha256:aaa' }], 'several refreshes later, still one');
  t.same(a.channelMismatches(), seen);
  const errors = lines.filter((l) => l.level === 50);
  t.equal(errors.length, 1, 'one error line');
  t.match(errors[0]?.msg, /proxy b .*sha256:bbb.*proxy a .*sha256:aaa/);

  // b changes to a third configuration: a new distinct mismatch; then to ours: none.
  await b.update({ channelFingerprint: 'sha256:ccc' });
  await a.refresh();
  t.equal(seen.length, 2, 'the second mismatch');
  t.equal(seen[1]?.theirs, 'sha256:ccc');
  await b.update({ channelFingerprint: 'sha256:aaa' });
  await a.refresh();
  t.same(a.channelMismatches(), [], 'the mismatch cleared');
  t.equal(lines.filter((l) => l.level === 50).length, 2);
});

t.test('a TTL of 0 is refused', async (t) => {
  t.throws(() => new ClusterMember({ store: new MemoryRouteStore(), registry: new Agents(), presence: presence('a'), ttlMs: 0 }), {
    code: ErrorCodes.INVALID_ARGUMENT,
  });
});
