// Peering between `gate-mux proxy` processes on one real redis-server:
// A is where psql connects; B, C and D each hold a tunnel of agent `edge` (one agent process-side
// per proxy, certificates from the cluster CA the four share through one data_dir) to a real
// PostgreSQL. kill -9 of B: psql through A keeps working through another holder at once (B's stale
// record costs one refused dial). SIGTERM of C with a psql session open on it: the session finishes,
// new psql sessions through A go to D meanwhile, and C exits 0.
import t from 'tap';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RedisRouteStore } from '../../lib/cluster/redis-route-store.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { clusterAuthority } from '../helpers/cluster.js';
import { run, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { queryRunning, startPostgres } from '../helpers/postgres.js';
import { startProxyCommand, stopProxyCommand, type StartedProxy } from '../helpers/proxy-command.js';
import { startRedis } from '../helpers/redis.js';
import { tempDir } from '../helpers/temp-dir.js';

/** The proxy id a `gate-mux proxy` logged when it joined the cluster (JSON lines). */
function proxyIdOf(proxy: StartedProxy): string {
  const match = /"proxyId":"([^"]+)"[^\n]*"msg":"joined the cluster"|"msg":"joined the cluster"[^\n]*"proxyId":"([^"]+)"/.exec(
    proxy.output(),
  );
  if (!match) throw new Error(`no "joined the cluster" line:\n${proxy.output()}`);
  return (match[1] ?? match[2])!;
}

/** The address a `gate-mux proxy` banner says `listener` is on. */
function listenerOf(proxy: StartedProxy, listener: string): string {
  const match = new RegExp(`listening on (\\S+) \\(${listener}:`).exec(proxy.output());
  if (!match) throw new Error(`no ${listener} listener in:\n${proxy.output()}`);
  return match[1]!;
}

t.test('psql through a proxy process to an agent another proxy process holds; kill -9 and SIGTERM of holders', async (t) => {
  const [redis, pg] = [await startRedis(t), await startPostgres(t)];
  const psql = requirePeer(t, 'psql', 'postgresql-client');
  if (!redis || !pg || !psql) return;
  const dir = await tempDir(t, 'peering-processes');
  const dataDir = join(dir, 'data');
  const target = `127.0.0.1:${pg.port}`;
  const start = async (name: string): Promise<StartedProxy> => {
    const config = join(dir, `${name}.yaml`);
    await writeFile(
      config,
      `version: v3\ndata_dir: ${dataDir}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n  peer_listen_addr: 127.0.0.1:0\n` +
        `  upstreams:\n    postgres: tunnel:edge/${target}\ncluster:\n  store: redis://${redis.host}:${redis.port}\n  presence_ttl: 3s\n`,
    );
    return startProxyCommand(t, ['--config', config, '--log-format', 'json', '--drain-timeout', '20'], dir);
  };
  const a = await start('a');
  const holders = { b: await start('b'), c: await start('c'), d: await start('d') };
  const ca = await clusterAuthority(dataDir);
  for (const proxy of Object.values(holders)) {
    const agent = startAgent({
      proxy: listenerOf(proxy, 'multiplex'),
      name: 'edge',
      ...ca.issue({ commonName: 'edge', usage: 'client' }),
      ca: ca.cert,
      serverName: 'localhost',
      resources: [target],
      env: {},
      backoff: { initialMs: 200, maxMs: 1000 },
    });
    t.teardown(() => agent.close());
    await agent.waitConnected(10_000);
  }
  const observer = new RedisRouteStore({ host: redis.host, port: redis.port });
  t.teardown(() => observer.close());
  t.ok(await observer.ready(5000));
  await until(async () => (await observer.holders('edge')).length === 3, 'B, C and D holding edge in Redis');

  const query = (proxy: StartedProxy, sql: string) =>
    run(
      psql,
      [
        `host=localhost port=${listenerOf(proxy, 'multiplex').split(':')[1]} sslmode=verify-full sslrootcert=${join(dataDir, 'ca.pem')} user=${pg.user} dbname=postgres`,
        '-Atc',
        sql,
      ],
      {
        env: { ...process.env, PGCONNECT_TIMEOUT: '10' },
        timeoutMs: 30_000,
      },
    );
  const first = await query(a, "select 'through a peer'");
  t.equal(first.code, 0, first.stderr);
  t.equal(first.stdout.trim(), 'through a peer', 'psql on A reaches PostgreSQL through a tunnel another process holds');

  // kill -9 of B: its records stay in Redis until presence_ttl, and every dial still gets through.
  const killed = once(holders.b.child, 'exit');
  holders.b.child.kill('SIGKILL');
  await killed;
  for (let i = 0; i < 4; i++) {
    const r = await query(a, `select 'after kill -9, ${i}'`);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.trim(), `after kill -9, ${i}`, 'through another holder');
  }
  await until(async () => (await observer.holders('edge')).length === 2, 'B out of the store within its TTL', 15_000);

  // SIGTERM of C while a psql session runs on it.
  const long = query(holders.c, "select pg_sleep(3), 'the session finished'");
  const sleeping = (): Promise<boolean> => queryRunning(pg, psql, 'select pg_sleep(3)%');
  await until(sleeping, 'the long query running through C');
  const stopped = stopProxyCommand(holders.c.child);
  // Marked draining, then withdrawn as close() begins (the draining mark is a moment's when the
  // drain timeout is the only wait): either way no proxy chooses C for a new dial.
  const idC = proxyIdOf(holders.c);
  await until(
    async () => !(await observer.proxies()).some((p) => p.id === idC && !p.draining),
    'C draining or gone from the store',
    10_000,
  );
  await until(() => holders.c.output().includes('"msg":"draining: no new tunnels'), 'C logging its drain', 10_000);
  const during = await query(a, "select 'during the drain'");
  t.equal(during.code, 0, during.stderr);
  t.equal(during.stdout.trim(), 'during the drain', 'a new session goes elsewhere (D) while C drains');
  const finished = await long;
  t.equal(finished.code, 0, finished.stderr);
  t.match(finished.stdout, /the session finished/, 'the open session on C finished');
  t.equal(await stopped, 0, 'C exits 0 after draining');
  const last = await query(a, "select 'after the drain'");
  t.equal(last.code, 0, last.stderr);
});
