import t from 'tap';
import { parseConfig } from '../../lib/config/load.js';
import { planListeners, routeMatchFor, routeMatchesFor, SSH_PORT_SILENT_AFTER_MS, type ListenerSpec } from '../../lib/proxy/listener-plan.js';

const ALL_UPSTREAMS = `  upstreams:
    ssh: 127.0.0.1:22
    tunnel: 127.0.0.1:4024
    kube: 127.0.0.1:6443
    postgres: 127.0.0.1:5432
    mysql: 127.0.0.1:3306
    mongodb: 127.0.0.1:27017
    redis: 127.0.0.1:6379
`;

function byName(listeners: ListenerSpec[], name: string): ListenerSpec {
  const found = listeners.find((l) => l.name === name);
  if (!found) throw new Error(`no listener ${name}`);
  return found;
}

t.test('multiplex: one listener on the web address carries every protocol', async (t) => {
  const { config } = parseConfig(`proxy_service:\n  web_listen_addr: 127.0.0.1:3080\n${ALL_UPSTREAMS}`);
  const plan = planListeners(config);
  t.equal(plan.mode, 'multiplex');
  t.equal(plan.listeners.length, 1);
  const [shared] = plan.listeners;
  t.match(shared, { name: 'multiplex', host: '127.0.0.1', port: 3080, configKey: 'proxy_service.web_listen_addr' });
  t.equal(shared?.silentRoute, undefined, 'no silence route on a shared port');
  const routes = shared?.routes ?? [];
  const names = routes.map((r) => r.name);
  t.same(new Set(names).size, names.length, 'route names are unique');
  for (const expected of [
    'web', 'web-plaintext', 'web-default-tls', 'ssh', 'ssh-tls', 'tunnel', 'kube', 'kube-local',
    'postgres', 'postgres-ping', 'postgres-sslrequest', 'postgres-plaintext',
    'mysql', 'mysql-ping', 'mysql-versioned', 'mongodb', 'mongodb-ping', 'redis', 'redis-ping',
  ]) {
    t.ok(names.includes(expected), `has ${expected}`);
  }
  t.equal(names[names.length - 1], 'web-default-tls', 'the TLS default comes last');
  t.ok(names.indexOf('mysql-ping') < names.indexOf('mysql-versioned'), 'exact ALPN before the prefix');

  const route = (name: string) => routes.find((r) => r.name === name);
  t.match(route('web'), { protocol: 'web', match: { alpn: ['http/1.1', 'h2', 'acme-tls/1'] }, transport: 'tls-terminate', upstream: undefined });
  t.match(route('web-plaintext'), { match: { protocol: ['http1', 'h2'] }, transport: 'plaintext' });
  t.match(route('ssh'), { match: { protocol: 'ssh' }, transport: 'plaintext', upstream: { host: '127.0.0.1', port: 22 } });
  t.match(route('ssh-tls'), { match: { alpn: 'gate-proxy-ssh' }, transport: 'tls-terminate' });
  t.match(route('tunnel'), { match: { alpn: 'gate-reversetunnel' }, upstream: { port: 4024 } });
  t.match(route('kube'), { match: { sniPrefix: 'kube-gate-proxy-alpn.' }, transport: 'tls-passthrough', upstream: { port: 6443 } });
  t.match(route('kube-local'), { match: { sni: 'kube.gate.cluster.local' }, transport: 'tls-passthrough' });
  t.match(route('postgres'), { match: { alpn: ['gate-postgres', 'postgresql'] }, framing: 'raw' });
  t.match(route('postgres-ping'), { match: { alpn: 'gate-postgres-ping' }, framing: 'ping' });
  t.match(route('postgres-sslrequest'), { match: { protocol: 'tls' }, afterPostgresSslRequest: true, transport: 'tls-terminate' });
  t.match(route('postgres-plaintext'), { match: { protocol: 'postgres' }, transport: 'plaintext' });
  t.match(route('mysql'), { match: { alpn: 'gate-mysql' }, upstream: { port: 3306 } });
  t.match(route('mysql-versioned'), { match: { alpnPrefix: 'gate-mysql-' }, framing: 'per-alpn' });
  t.match(route('mongodb-ping'), { match: { alpn: 'gate-mongodb-ping' }, framing: 'ping', upstream: { port: 27017 } });
  t.match(route('redis'), { match: { alpn: 'gate-redis' }, upstream: { port: 6379 } });
});

t.test('multiplex: a protocol without upstream has no route (fails closed)', async (t) => {
  const { config } = parseConfig('proxy_service:\n  upstreams: {postgres: 127.0.0.1:5432}\n');
  const names = planListeners(config).listeners[0]?.routes.map((r) => r.name) ?? [];
  t.same(names.filter((n) => !n.startsWith('web')), ['postgres', 'postgres-ping', 'postgres-sslrequest', 'postgres-plaintext']);
});

t.test('separate: each protocol on its legacy port, web still routes TLS by ALPN', async (t) => {
  const { config } = parseConfig(`auth_service: {proxy_listener_mode: separate}\nproxy_service:\n  web_listen_addr: 127.0.0.1:3080\n${ALL_UPSTREAMS}`);
  const plan = planListeners(config);
  t.equal(plan.mode, 'separate');
  t.same(
    plan.listeners.map((l) => [l.name, l.host, l.port]),
    [
      ['web', '127.0.0.1', 3080],
      ['ssh', '127.0.0.1', 3023],
      ['tunnel', '127.0.0.1', 3024],
      ['kube', '127.0.0.1', 3026],
      ['postgres', '127.0.0.1', 5432],
      ['mysql', '127.0.0.1', 3036],
      ['mongodb', '127.0.0.1', 27017],
      ['redis', '127.0.0.1', 6379],
    ],
    'legacy ports on the web host',
  );
  const web = byName(plan.listeners, 'web');
  const webNames = web.routes.map((r) => r.name);
  t.ok(webNames.includes('web-plaintext'), 'plaintext HTTP on the web port');
  for (const name of ['ssh-tls', 'tunnel', 'kube', 'postgres', 'postgres-ping', 'mysql', 'mysql-versioned', 'mongodb', 'redis']) {
    t.ok(webNames.includes(name), `web port routes ${name} by TLS`);
  }
  for (const name of ['ssh', 'postgres-sslrequest', 'postgres-plaintext']) {
    t.notOk(webNames.includes(name), `no plaintext ${name} on the web port`);
  }

  const ssh = byName(plan.listeners, 'ssh');
  t.same(ssh.routes.map((r) => [r.name, r.match]), [['ssh', { protocol: 'ssh' }]]);
  t.equal(ssh.silentRoute, 'ssh');
  t.equal(ssh.silentAfterMs, SSH_PORT_SILENT_AFTER_MS);
  t.equal(ssh.configKey, 'proxy_service.listen_addr');

  const mysql = byName(plan.listeners, 'mysql');
  t.equal(mysql.silentRoute, 'mysql');
  t.equal(mysql.silentAfterMs, 0, 'plaintext MySQL is forwarded without waiting for the client');
  t.match(mysql.routes, [{ name: 'mysql', match: { protocol: 'silent' }, transport: 'plaintext', upstream: { port: 3306 } }]);

  const postgres = byName(plan.listeners, 'postgres');
  t.same(
    postgres.routes.map((r) => [r.name, r.match, r.transport]),
    [
      ['postgres-tls', { protocol: 'tls' }, 'tls-terminate'],
      ['postgres-plaintext', { protocol: 'postgres' }, 'plaintext'],
    ],
  );
  t.equal(postgres.silentRoute, undefined);

  t.match(byName(plan.listeners, 'kube').routes, [{ match: { protocol: 'tls' }, transport: 'tls-passthrough' }]);
  t.match(byName(plan.listeners, 'tunnel').routes, [
    { name: 'tunnel-ssh', match: { protocol: 'ssh' } },
    { name: 'tunnel', match: { alpn: 'gate-reversetunnel' } },
  ]);
  t.match(byName(plan.listeners, 'redis').routes, [{ match: { protocol: 'tls' }, transport: 'tls-terminate', framing: 'per-alpn' }]);
});

t.test('separate: configured addresses win; disabled protocols get no listener', async (t) => {
  const { config } = parseConfig(`auth_service: {proxy_listener_mode: separate}
proxy_service:
  web_listen_addr: 0.0.0.0:443
  mysql_listen_addr: 10.0.0.1:13306
  upstreams: {mysql: 127.0.0.1:3306}
`);
  const plan = planListeners(config);
  t.same(plan.listeners.map((l) => [l.name, l.host, l.port]), [
    ['web', '0.0.0.0', 443],
    ['mysql', '10.0.0.1', 13306],
  ]);
});

t.test('peering has its own port in both modes', async (t) => {
  const multiplex = planListeners(parseConfig('proxy_service:\n  web_listen_addr: 127.0.0.1:3080\n  upstreams: {peer: 10.0.0.2:3021}\n').config);
  t.same(multiplex.listeners.map((l) => [l.name, l.port]), [['multiplex', 3080], ['peer', 3021]]);
  t.match(byName(multiplex.listeners, 'peer').routes, [{ name: 'peer', match: { protocol: 'tls' }, transport: 'tls-passthrough', upstream: { host: '10.0.0.2', port: 3021 } }]);
  t.notOk(multiplex.listeners[0]?.routes.some((r) => r.protocol === 'peer'), 'no peer route on the shared port');
  const separate = planListeners(parseConfig('auth_service: {proxy_listener_mode: separate}\nproxy_service:\n  peer_listen_addr: :13021\n  upstreams: {peer: 10.0.0.2:3021}\n').config);
  t.same(separate.listeners.map((l) => [l.name, l.host, l.port]), [['web', '0.0.0.0', 3080], ['peer', '0.0.0.0', 13021]]);
});

t.test('routeMatchFor gives the primary TLS recognition', async (t) => {
  t.same(routeMatchFor('web'), { alpn: ['http/1.1', 'h2', 'acme-tls/1'] });
  t.same(routeMatchFor('ssh'), { alpn: 'gate-proxy-ssh' });
  t.same(routeMatchFor('tunnel'), { alpn: 'gate-reversetunnel' });
  t.same(routeMatchFor('kube'), { sniPrefix: 'kube-gate-proxy-alpn.' });
  t.same(routeMatchFor('postgres'), { alpn: ['gate-postgres', 'postgresql'] });
  t.same(routeMatchFor('mysql'), { alpn: 'gate-mysql' });
  t.same(routeMatchFor('mongodb'), { alpn: 'gate-mongodb' });
  t.same(routeMatchFor('redis'), { alpn: 'gate-redis' });
  t.same(routeMatchFor('peer'), { protocol: 'tls' });
  t.same(routeMatchesFor('mysql'), [{ alpn: 'gate-mysql' }, { alpn: 'gate-mysql-ping' }, { alpnPrefix: 'gate-mysql-' }]);
  t.same(routeMatchesFor('ssh', { plaintext: false }), [{ alpn: 'gate-proxy-ssh' }]);
  t.same(routeMatchesFor('ssh'), [{ alpn: 'gate-proxy-ssh' }, { protocol: 'ssh' }]);
});
