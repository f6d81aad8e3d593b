// Real peers: PostgreSQL (apt-get install postgresql) with psql, and tinyproxy (apt-get install
// tinyproxy), both started by the test on loopback. The whole path of a database session through a
// reverse tunnel:
//   psql -> startLocalProxy (TLS, ALPN gate-postgres) -> Multiplexer -> tunnel -> agent -> PostgreSQL
// with the agent's tunnel dialled through tinyproxy (CONNECT), and the proxy side restarted mid-way.
import t from 'tap';
import { once } from 'node:events';
import { startLocalProxy } from '../../lib/client/local-proxy.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { findBinary } from '../helpers/peers.js';
import { run } from '../helpers/net.js';
import { startPostgres } from '../helpers/postgres.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';
import { agentCertificate, startProxySide, type ProxySide } from '../helpers/tunnel-rig.js';

const { ca } = devCertificates();

t.test('psql through the local proxy, the multiplexer and an agent behind tinyproxy; the proxy restarts', async (t) => {
  const pg = await startPostgres(t);
  const proxy = await startTinyproxy(t);
  if (!pg || !proxy) return;
  const psql = findBinary('psql');
  if (!psql) return t.fail('postgres is installed but psql is not');
  const target = `${pg.host}:${pg.port}`;
  const routes = [{ alpn: 'gate-postgres', agent: 'db-agent', target }];

  let side: ProxySide = await startProxySide(routes);
  t.teardown(() => side.close());
  const port = side.port;
  const agent = startAgent({
    proxy: `127.0.0.1:${port}`,
    name: 'db-agent',
    ...agentCertificate('db-agent'),
    ca: ca.cert,
    serverName: 'localhost',
    resources: [target],
    // Loopback targets are always direct under HTTPS_PROXY (docs/client.md), so the proxy is given
    // explicitly, as the dialer tests do: the tunnel itself must go through tinyproxy's CONNECT.
    dialProxy: parseProxyUrl(proxy.url),
    backoff: { initialMs: 50, maxMs: 500 },
  });
  t.teardown(() => agent.close());
  t.same(await agent.waitConnected(), { via: proxy.url, connections: 1 }, 'the tunnel went through tinyproxy');
  t.match(proxy.output(), new RegExp(`CONNECT 127\\.0\\.0\\.1:${port}`), 'tinyproxy carried the tunnel');

  const local = await startLocalProxy({
    listen: { host: '127.0.0.1', port: 0 },
    target: `127.0.0.1:${port}`,
    alpn: ['gate-postgres'],
    ca: ca.cert,
    serverName: 'localhost',
    proxy: null,
  });
  t.teardown(() => local.close());
  const query = (sql: string) =>
    run(psql, ['-h', '127.0.0.1', '-p', String(local.address().port), '-U', pg.user, '-d', 'postgres', '-Atc', sql], {
      env: { ...process.env, PGSSLMODE: 'disable', PGCONNECT_TIMEOUT: '10' },
      timeoutMs: 20_000,
    });

  const first = await query("select 'through the tunnel', 6 * 7");
  t.equal(first.code, 0, first.stderr);
  t.equal(first.stdout.trim(), 'through the tunnel|42');
  const created = await query(
    'create table notes (id int primary key, body text); insert into notes values (1, repeat($$x$$, 100000)); select length(body) from notes',
  );
  t.equal(created.code, 0, created.stderr);
  t.equal(created.stdout.trim().split('\n').pop(), '100000', 'a 100 kB row came back whole');

  // The proxy side goes away (every connection and session dropped at once) and comes back on the
  // same port with a fresh registry: the agent must notice, back off, and register again.
  const down = once(agent, 'disconnected');
  const up = once(agent, 'connected');
  await side.close();
  await down;
  side = await startProxySide(routes, { port });
  await side.registry.waitFor('db-agent', 20_000);
  t.same((await up)[0], { via: proxy.url, connections: 2 }, 'the agent reconnected through tinyproxy');

  const after = await query('select count(*) from notes');
  t.equal(after.code, 0, after.stderr);
  t.equal(after.stdout.trim(), '1', 'the next query works after the restart');
});
