// Every long-lived part that owns sockets or timers has one lifecycle (lib/lifecycle.ts):
// `close({graceMs})` finishes and resolves once everything is released, a second call returning the
// same promise; `destroy(err)` stops now, synchronously, and may be called again; `state` says
// where it is and ends 'closed'. Each part is built for real on 127.0.0.1 (the cheapest way it
// runs), most with something in flight, and taken through both paths. A source scan keeps the
// old names (`stop()`, a synchronous `close(): void`) from coming back outside deprecated aliases.
import t, { type Test } from 'tap';
import cluster from 'node:cluster';
import { once } from 'node:events';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { startLocalProxy } from '../../lib/client/local-proxy.js';
import { ClusterDialer } from '../../lib/cluster/cluster-dialer.js';
import { ClusterMember } from '../../lib/cluster/cluster-member.js';
import { DiagServer } from '../../lib/cluster/diag-server.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import { GateMetrics } from '../../lib/cluster/metrics.js';
import { PeerPool } from '../../lib/cluster/peer-pool.js';
import { PeerServer } from '../../lib/cluster/peer-server.js';
import { RedisRouteStore } from '../../lib/cluster/redis-route-store.js';
import { ConnectionUpgrade } from '../../lib/conn-upgrade/upgrade-server.js';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { custom } from '../../lib/handlers/builders.js';
import type { Closable } from '../../lib/lifecycle.js';
import { runWorkers, type WorkerPool } from '../../lib/mux/workers.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { ProxyDiagnostics } from '../../lib/proxy/diagnostics.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { AgentTunnel } from '../../lib/tunnel/agent-tunnel.js';
import { TunnelRegistry } from '../../lib/tunnel/registry.js';
import { silentLogger } from '../../lib/log.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { startRedis } from '../helpers/redis.js';
import { tempDir } from '../helpers/temp-dir.js';
import { agentCertificate } from '../helpers/tunnel-rig.js';

type Made = {
  part: Closable;
  initial?: string;
  parts?: () => Record<string, Closable>;
  /** Resolves once what destroy() let go of has really gone (a child process exited). */
  gone?: () => Promise<void>;
};
type Maker = (t: Test) => Promise<Made | undefined>;

/** A TCP port on 127.0.0.1 nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A client connected to `port` that sends nothing: work in flight for the part to end. */
async function idleClient(t: Test, port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  t.teardown(() => void socket.destroy());
  await once(socket, 'connect');
  return socket;
}

const registryFor = (t: Test): TunnelRegistry => {
  const registry = new TunnelRegistry({ logger: silentLogger() });
  t.teardown(() => registry.destroy());
  return registry;
};

/**
 * runWorkers' pool in the primary, with one worker: a small script that starts as a worker and
 * waits (its default SIGTERM ends it), so that the pool has a real process to stop.
 */
async function workerPool(t: Test): Promise<WorkerPool> {
  const script = `${await tempDir(t, 'worker')}/worker.mjs`;
  const runWorkersModule = new URL('../../lib/mux/workers.js', import.meta.url).href;
  writeFileSync(
    script,
    `import { runWorkers } from ${JSON.stringify(runWorkersModule)};\n` +
      'await runWorkers({ workers: 1, start: () => {} });\nsetInterval(() => {}, 60_000);\n',
  );
  cluster.setupPrimary({ exec: script, silent: true });
  return (await runWorkers({ workers: 1, start: () => {}, stopGraceMs: 5_000 })) as WorkerPool;
}

const MAKERS: Record<string, Maker> = {
  async WorkerPool(t) {
    const pool = await workerPool(t);
    t.equal(pool.pids().length, 1, 'one worker running');
    return { part: pool, gone: () => pool.stopped };
  },
  async Multiplexer(t) {
    const mux = new Multiplexer({
      routes: [{ name: 'any', match: { protocol: ['tls', 'http1', 'ssh', 'silent'] }, handler: custom(() => {}) }],
      detectTimeoutMs: 60_000,
    });
    const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
    await idleClient(t, port);
    return { part: mux };
  },
  async GateProxy(t) {
    const running = await startGateProxy(t, { mode: 'multiplex', upstreams: {} });
    await idleClient(t, running.port('multiplex'));
    const proxy = running.proxy;
    // Its parts are private: read here only to check that the proxy's close reaches each of them.
    const inner = (name: string): Closable => Reflect.get(proxy, name) as Closable;
    return {
      part: proxy,
      parts: () => ({
        ListenerSet: inner('listeners'),
        ClusterWiring: inner('clusterWiring'),
        ProxyDiagnostics: inner('diagnostics'),
        TunnelRegistry: inner('registry'),
        ProxyEndpoints: inner('endpoints'),
      }),
    };
  },
  async ProxyDiagnostics() {
    const diagnostics = new ProxyDiagnostics(silentLogger());
    (await diagnostics.prepare({ host: '127.0.0.1', port: 0 })).commit();
    return { part: diagnostics };
  },
  async DiagServer(t) {
    const server = await DiagServer.start({ host: '127.0.0.1', port: 0, metrics: new GateMetrics(), readiness: () => [] });
    await idleClient(t, server.address.port);
    return { part: server };
  },
  async TunnelRegistry(t) {
    return { part: registryFor(t) };
  },
  async PeerServer(t) {
    return { part: new PeerServer({ registry: registryFor(t) }) };
  },
  async PeerPool() {
    return {
      part: new PeerPool({
        identity: () => {
          throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'no peer is dialled in this test');
        },
      }),
    };
  },
  async ClusterMember(t) {
    const member = new ClusterMember({
      store: new MemoryRouteStore(),
      registry: registryFor(t),
      presence: { id: 'proxy-a', peerAddr: '', version: '1.0.0', channelFingerprint: '' },
      ttlMs: 60_000,
    });
    await member.start();
    return { part: member };
  },
  async ClusterDialer(t) {
    const store = new MemoryRouteStore();
    const registry = registryFor(t);
    const member = new ClusterMember({
      store,
      registry,
      presence: { id: 'proxy-a', peerAddr: '', version: '1.0.0', channelFingerprint: '' },
      ttlMs: 60_000,
    });
    t.teardown(() => member.destroy());
    const peers = new PeerPool({ identity: () => ({ cert: '', key: '', ca: '' }) });
    t.teardown(() => peers.destroy());
    return { part: new ClusterDialer({ registry, cluster: { store, member, peers } }) };
  },
  async MemoryRouteStore() {
    return { part: new MemoryRouteStore() };
  },
  async RedisRouteStore(t) {
    const redis = await startRedis(t);
    if (!redis) return undefined;
    const store = new RedisRouteStore({ host: redis.host, port: redis.port });
    t.ok(await store.ready(5_000), 'connected');
    return { part: store };
  },
  async ConnectionUpgrade(t) {
    const mux = new Multiplexer({ routes: [] });
    t.teardown(() => mux.destroy());
    return { part: new ConnectionUpgrade({ target: mux }) };
  },
  async LocalProxy(t) {
    const local = await startLocalProxy({
      listen: { host: '127.0.0.1', port: 0 },
      target: `127.0.0.1:${await closedPort()}`,
      alpn: ['postgres'],
      insecure: true,
      proxy: null,
    });
    await idleClient(t, local.address().port);
    return { part: local };
  },
  async TunnelAgent() {
    const { cert, key } = agentCertificate('lifecycle-agent');
    const agent = startAgent({
      proxy: `127.0.0.1:${await closedPort()}`,
      name: 'lifecycle-agent',
      cert,
      key,
      ca: devCertificates().ca.cert,
      dialProxy: null,
      backoff: { initialMs: 60_000, maxMs: 60_000 },
    });
    return { part: agent };
  },
  async AgentTunnel() {
    const tunnel = new AgentTunnel({
      proxy: '127.0.0.1:1',
      ca: devCertificates().ca.cert,
      cert: '',
      key: '',
      targetDialTimeoutMs: 1_000,
      heartbeatIntervalMs: 60_000,
      heartbeatTimeoutMs: 60_000,
      log: silentLogger(),
      allow: () => false,
      signal: new AbortController().signal,
      track: () => {},
      served: () => {},
      description: () => ({ serverId: '', hostname: '', services: [], version: '', upgrader: '', updateGroup: '' }),
    });
    return { part: tunnel, initial: 'connecting' };
  },
};

t.test('close({graceMs}) finishes once, then every part is closed', async (t) => {
  for (const [name, make] of Object.entries(MAKERS).filter(([n]) => !process.env.ONLY || n === process.env.ONLY)) {
    await t.test(name, async (t) => {
      const made = await make(t);
      if (!made) return;
      const { part } = made;
      t.equal(part.state, made.initial ?? 'open', 'open before close');
      const first = part.close({ graceMs: 50 });
      t.ok(first instanceof Promise, 'close returns a promise');
      t.equal(part.close({ graceMs: 50 }), first, 'a second close returns the same promise');
      t.not(part.state, made.initial ?? 'open', 'no longer open once close was called');
      await first;
      t.equal(part.state, 'closed', 'closed once close resolved');
      for (const [inner, p] of Object.entries(made.parts?.() ?? {})) t.equal(p.state, 'closed', `its ${inner} is closed too`);
      t.doesNotThrow(() => part.destroy(), 'destroy after close is a no-op');
      t.equal(part.state, 'closed');
    });
  }
});

t.test('destroy(err) stops at once, and may be called again', async (t) => {
  for (const [name, make] of Object.entries(MAKERS).filter(([n]) => !process.env.ONLY || n === process.env.ONLY)) {
    await t.test(name, async (t) => {
      const made = await make(t);
      if (!made) return;
      const { part } = made;
      part.destroy(new GateError(ErrorCodes.SHUTDOWN, 'the test stops it'));
      t.equal(part.state, 'closed', 'closed as soon as destroy returns');
      t.doesNotThrow(() => part.destroy(), 'a second destroy is a no-op');
      await t.resolves(part.close(), 'close after destroy resolves');
      t.equal(part.state, 'closed');
      if (made.gone) await t.resolves(made.gone(), 'what it held is gone');
    });
  }
});

t.test('no part keeps an old lifecycle name (stop(), a synchronous close()) but as a deprecated alias', async (t) => {
  const lib = fileURLToPath(new URL('../../../lib/', import.meta.url));
  const found: string[] = [];
  for (const entry of readdirSync(lib, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const path = `${entry.parentPath}/${entry.name}`;
    const lines = readFileSync(path, 'utf8').split('\n');
    lines.forEach((line, i) => {
      const old = /^\s+(?:async\s+)?stop\([^)]*\)\s*:|^\s+close\(\)\s*:\s*void/.test(line);
      if (old && !lines[i - 1]?.includes('@deprecated')) found.push(`${path.slice(lib.length)}:${i + 1}: ${line.trim()}`);
    });
  }
  t.strictSame(found, [], 'every lifecycle is close({graceMs}) / destroy(err)');
});

t.test("docs/api names the lifecycle, in the same words, under each lifecycle class's heading", async (t) => {
  const api = fileURLToPath(new URL('../../../docs/api/', import.meta.url));
  const WORDS = 'Lifecycle: `close({graceMs})`, `destroy(err)`, `state`';
  const HEADINGS: Record<string, string[]> = {
    'mux.md': ['Multiplexer', 'runWorkers'],
    'proxy.md': ['GateProxy'],
    'tunnel.md': ['startAgent', 'TunnelRegistry'],
    'client.md': ['startLocalProxy'],
    'gate-mux.md': ['ConnectionUpgrade', 'MemoryRouteStore', 'RedisRouteStore'],
  };
  t.match(readFileSync(`${api}README.md`, 'utf8'), '## One lifecycle', 'the rule itself');
  for (const [page, names] of Object.entries(HEADINGS)) {
    const text = readFileSync(`${api}${page}`, 'utf8');
    for (const name of names) {
      const section = text.split(`### \`${name}\`\n`)[1]?.split(/\n#{2,3} /)[0] ?? '';
      t.ok(section.includes(WORDS), `${page} ${name}`);
    }
  }
});
