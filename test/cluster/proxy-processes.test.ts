// Two `gate-mux proxy` processes on one real redis-server: both announce
// themselves; `kill -9` of one takes it out of the store once its presence_ttl has passed (the aim:
// a crashed proxy stops being dialled within 15 s), and SIGTERM of the other withdraws it at once.
import t from 'tap';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RedisRouteStore } from '../../lib/cluster/redis-route-store.js';
import { startProxyCommand, stopProxyCommand, type StartedProxy } from '../helpers/proxy-command.js';
import { startRedis } from '../helpers/redis.js';
import { tempDir } from '../helpers/temp-dir.js';
import { until } from '../helpers/net.js';

/**
 * The proxy id a `gate-mux proxy` logged when it joined the cluster (JSON lines: stdout is not a
 * terminal). Waited for: pino writes its lines asynchronously, so the start banner the helper
 * waits for can come out before them.
 */
async function proxyIdOf(proxy: StartedProxy): Promise<string> {
  const find = (): string | undefined => {
    for (const line of proxy.output().split('\n')) {
      if (!line.startsWith('{')) continue;
      const entry = JSON.parse(line) as { msg?: string; proxyId?: string };
      if (entry.msg === 'joined the cluster' && entry.proxyId) return entry.proxyId;
    }
    return undefined;
  };
  await until(() => find() !== undefined, `a "joined the cluster" line in:\n${proxy.output()}`, 10_000);
  return find()!;
}

t.test('kill -9 leaves the store within presence_ttl; SIGTERM withdraws at once', async (t) => {
  const redis = await startRedis(t);
  if (!redis) return;
  const dir = await tempDir(t, 'cluster-processes');
  const ttlMs = 3000;
  const start = async (name: string): Promise<StartedProxy> => {
    const config = join(dir, `${name}.yaml`);
    await writeFile(
      config,
      `version: v3\ndata_dir: ${join(dir, name)}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n  peer_public_addr: ${name}.internal\ncluster:\n  store: redis://${redis.host}:${redis.port}\n  presence_ttl: ${ttlMs}ms\n`,
    );
    return startProxyCommand(t, ['--config', config, '--log-format', 'json'], dir);
  };
  const [one, two] = [await start('one'), await start('two')];
  const [idOne, idTwo] = [await proxyIdOf(one), await proxyIdOf(two)];
  const observer = new RedisRouteStore({ host: redis.host, port: redis.port });
  t.teardown(() => observer.close());
  t.ok(await observer.ready(5000));
  const live = async () => new Map((await observer.proxies()).map((p) => [p.id, p.peerAddr]));
  t.same(
    await live(),
    new Map([
      [idOne, 'one.internal:3021'],
      [idTwo, 'two.internal:3021'],
    ]),
    'both processes announced themselves',
  );

  const killed = Date.now();
  const exited = once(one.child, 'exit');
  one.child.kill('SIGKILL');
  await exited;
  await until(async () => !(await live()).has(idOne), 'the killed proxy leaving the store', 15_000);
  t.pass('a crashed proxy left the store by itself, within 15 s');
  t.comment(`gone ${Date.now() - killed} ms after kill -9 (presence_ttl ${ttlMs} ms)`);
  t.ok((await live()).has(idTwo), 'the other stays, refreshed');

  t.equal(await stopProxyCommand(two.child), 0, 'SIGTERM: exit 0');
  t.same(await live(), new Map(), 'withdrawn before it exited');
});
