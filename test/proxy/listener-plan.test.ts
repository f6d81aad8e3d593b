import t from 'tap';
import { parseConfig } from '../../lib/config/load.js';
import { RouteTable, type RouteQuery } from '../../lib/mux/route-table.js';
import type { DetectedProtocol } from '../../lib/handlers/types.js';
import {
  planListeners,
  routeMatchFor,
  routeMatchesFor,
  SSH_PORT_SILENT_AFTER_MS,
  type ListenerSpec,
} from '../../lib/proxy/listener-plan.js';

const ALL_UPSTREAMS = `  upstreams:
    ssh: 127.0.0.1:22
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
    'web',
    'web-plaintext',
    'web-default-tls',
    'ssh',
    'ssh-tls',
    'tunnel',
    'kube',
    'kube-local',
    'postgres',
    'postgres-ping',
    'postgres-startup',
    'mysql',
    'mysql-ping',
    'mysql-versioned',
    'mongodb',
    'mongodb-ping',
    'redis',
    'redis-ping',
  ]) {
    t.ok(names.includes(expected), `has ${expected}`);
  }
  t.equal(names[names.length - 1], 'web-default-tls', 'the TLS default comes last');
  t.ok(names.indexOf('mysql-ping') < names.indexOf('mysql-versioned'), 'exact ALPN before the prefix');

  const route = (name: string) => routes.find((r) => r.name === name);
  t.match(route('web'), {
    protocol: 'web',
    match: { alpn: ['http/1.1', 'h2', 'acme-tls/1'], protocol: 'tls' },
    transport: 'tls-terminate',
    upstream: undefined,
  });
  t.same(route('web-default-tls')?.match, { protocol: 'tls' });
  t.match(route('web-plaintext'), { match: { protocol: ['http1', 'h2'] }, transport: 'plaintext' });
  t.match(route('ssh'), { match: { protocol: 'ssh' }, transport: 'plaintext', upstream: { host: '127.0.0.1', port: 22 } });
  t.match(route('ssh-tls'), { match: { alpn: 'gate-proxy-ssh' }, transport: 'tls-terminate' });
  t.match(
    route('tunnel'),
    { match: { alpn: 'gate-reversetunnel-framed' }, transport: 'tls-terminate', upstream: undefined },
    'the proxy hosts agents itself',
  );
  t.match(route('kube'), {
    match: { sniPrefix: 'kube-gate-proxy-alpn.', protocol: 'tls' },
    transport: 'tls-passthrough',
    upstream: { port: 6443 },
  });
  t.match(route('kube-local'), { match: { sni: 'kube.gate.cluster.local' }, transport: 'tls-passthrough' });
  t.same(route('postgres')?.match, { alpn: ['gate-postgres', 'postgresql'] }, 'no protocol: TLS after SSLRequest too');
  t.match(route('postgres-ping'), { match: { alpn: 'gate-postgres-ping' }, framing: 'ping' });
  t.match(route('postgres-startup'), { match: { protocol: 'postgres' }, transport: 'tls-if-sslrequest' });
  t.match(route('mysql'), { match: { alpn: 'gate-mysql' }, upstream: { port: 3306 } });
  t.match(route('mysql-versioned'), { match: { alpnPrefix: 'gate-mysql-' }, framing: 'per-alpn' });
  t.match(route('mongodb-ping'), { match: { alpn: 'gate-mongodb-ping' }, framing: 'ping', upstream: { port: 27017 } });
  t.match(route('redis'), { match: { alpn: 'gate-redis' }, upstream: { port: 6379 } });
});

t.test('multiplex: a protocol without upstream has no route (fails closed); the tunnel route is always there', async (t) => {
  const { config } = parseConfig('proxy_service:\n  upstreams: {postgres: "tunnel:db/127.0.0.1:5432"}\n');
  const routes = planListeners(config).listeners[0]?.routes ?? [];
  t.same(
    routes.map((r) => r.name).filter((n) => !n.startsWith('web')),
    ['tunnel', 'postgres', 'postgres-ping', 'postgres-startup'],
  );
  t.same(routes.find((r) => r.name === 'postgres')?.upstream, { agent: 'db', target: '127.0.0.1:5432' }, 'an upstream behind an agent');
});

t.test('separate: each protocol on its legacy port, web still routes TLS by ALPN', async (t) => {
  const { config } = parseConfig(
    `auth_service: {proxy_listener_mode: separate}\nproxy_service:\n  web_listen_addr: 127.0.0.1:3080\n${ALL_UPSTREAMS}`,
  );
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
  for (const name of ['ssh', 'postgres-startup']) {
    t.notOk(webNames.includes(name), `no plaintext ${name} on the web port`);
  }

  const ssh = byName(plan.listeners, 'ssh');
  t.same(
    ssh.routes.map((r) => [r.name, r.match]),
    [['ssh', { protocol: 'ssh' }]],
  );
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
      ['postgres', { protocol: 'postgres' }, 'tls-if-sslrequest'],
      ['postgres-tls', { protocol: 'tls' }, 'tls-terminate'],
    ],
  );
  t.equal(postgres.silentRoute, undefined);

  t.match(byName(plan.listeners, 'kube').routes, [{ match: { protocol: 'tls' }, transport: 'tls-passthrough' }]);
  t.match(byName(plan.listeners, 'tunnel').routes, [
    {
      name: 'tunnel',
      match: { alpn: 'gate-reversetunnel-framed' },
      transport: 'tls-terminate',
      upstream: undefined,
    },
  ]);
  t.equal(byName(plan.listeners, 'tunnel').routes.length, 1, 'no plaintext SSH route: agents speak TLS');
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
  t.same(
    plan.listeners.map((l) => [l.name, l.host, l.port]),
    [
      ['web', '0.0.0.0', 443],
      ['tunnel', '0.0.0.0', 3024],
      ['mysql', '10.0.0.1', 13306],
    ],
    'the tunnel port is always open in separate mode',
  );
});

t.test('peering has its own port in both modes, served by the proxy itself', async (t) => {
  const multiplex = planListeners(
    parseConfig('proxy_service:\n  web_listen_addr: 127.0.0.1:3080\n  peer_listen_addr: 127.0.0.1:3021\n').config,
  );
  t.same(
    multiplex.listeners.map((l) => [l.name, l.port]),
    [
      ['multiplex', 3080],
      ['peer', 3021],
    ],
  );
  t.match(byName(multiplex.listeners, 'peer').routes, [
    {
      name: 'peer',
      match: { alpn: 'gate-proxy-peer-framed', protocol: 'tls' },
      transport: 'tls-terminate',
      upstream: undefined,
    },
  ]);
  t.notOk(
    multiplex.listeners[0]?.routes.some((r) => r.protocol === 'peer'),
    'no peer route on the shared port',
  );
  const separate = planListeners(
    parseConfig('auth_service: {proxy_listener_mode: separate}\nproxy_service:\n  peer_listen_addr: :13021\n').config,
  );
  t.same(
    separate.listeners.map((l) => [l.name, l.host, l.port]),
    [
      ['web', '0.0.0.0', 3080],
      ['tunnel', '0.0.0.0', 3024],
      ['peer', '0.0.0.0', 13021],
    ],
  );
  const without = planListeners(parseConfig('proxy_service:\n  web_listen_addr: 127.0.0.1:3080\n').config);
  t.same(
    without.listeners.map((l) => l.name),
    ['multiplex'],
    'no peer_listen_addr: no peering',
  );
});

t.test('routeMatchFor gives the primary TLS recognition', async (t) => {
  t.same(routeMatchFor('web'), { alpn: ['http/1.1', 'h2', 'acme-tls/1'], protocol: 'tls' });
  t.same(routeMatchFor('ssh'), { alpn: 'gate-proxy-ssh', protocol: 'tls' });
  t.same(routeMatchFor('tunnel'), { alpn: 'gate-reversetunnel-framed', protocol: 'tls' });
  t.same(routeMatchFor('kube'), { sniPrefix: 'kube-gate-proxy-alpn.', protocol: 'tls' });
  t.same(routeMatchFor('postgres'), { alpn: ['gate-postgres', 'postgresql'] });
  t.same(routeMatchFor('mysql'), { alpn: 'gate-mysql', protocol: 'tls' });
  t.same(routeMatchFor('mongodb'), { alpn: 'gate-mongodb', protocol: 'tls' });
  t.same(routeMatchFor('redis'), { alpn: 'gate-redis', protocol: 'tls' });
  t.same(routeMatchFor('peer'), { alpn: 'gate-proxy-peer-framed', protocol: 'tls' });
  t.same(routeMatchesFor('mysql'), [
    { alpn: 'gate-mysql', protocol: 'tls' },
    { alpn: 'gate-mysql-ping', protocol: 'tls' },
    { alpnPrefix: 'gate-mysql-', protocol: 'tls' },
  ]);
  t.same(routeMatchesFor('ssh', { plaintext: false }), [{ alpn: 'gate-proxy-ssh', protocol: 'tls' }]);
  t.same(routeMatchesFor('ssh'), [{ alpn: 'gate-proxy-ssh', protocol: 'tls' }, { protocol: 'ssh' }]);
});

/** The plan's routes loaded into the real route table, to check what each client would reach. */
function table(listener: ListenerSpec): (protocol: DetectedProtocol, alpn?: string[], sni?: string) => string | undefined {
  const routes = new RouteTable(
    listener.routes.map((r) => ({ name: r.name, match: r.match, handler: { kind: 'custom' as const, handle: () => {} } })),
  );
  return (protocol, alpn = [], sni) => routes.select({ protocol, alpn, sni } satisfies RouteQuery)?.name;
}

t.test('multiplex: what the route table picks for each client', async (t) => {
  const { config } = parseConfig(`proxy_service:\n${ALL_UPSTREAMS}`);
  const [shared] = planListeners(config).listeners;
  if (!shared) throw new Error('no listener');
  const pick = table(shared);
  const cases: Array<[DetectedProtocol, string[], string | undefined, string | undefined]> = [
    ['tls', ['h2', 'http/1.1'], 'gate.example.com', 'web'],
    ['tls', [], 'gate.example.com', 'web-default-tls'],
    ['tls', ['unknown/1'], undefined, 'web-default-tls'],
    ['tls', ['acme-tls/1'], 'gate.example.com', 'web'],
    ['http1', [], undefined, 'web-plaintext'],
    ['h2', [], undefined, 'web-plaintext'],
    ['ssh', [], undefined, 'ssh'],
    ['tls', ['gate-proxy-ssh'], 'gate.example.com', 'ssh-tls'],
    ['tls', ['gate-reversetunnel'], undefined, 'web-default-tls'],
    ['tls', ['gate-reversetunnel-framed', 'gate-reversetunnel'], undefined, 'tunnel'],
    ['tls', ['gate-reversetunnel-framed'], undefined, 'tunnel'],
    ['tls', ['h2', 'http/1.1'], 'kube-gate-proxy-alpn.gate.example.com', 'kube'],
    ['tls', [], 'kube.gate.cluster.local', 'kube-local'],
    ['tls', ['gate-postgres'], undefined, 'postgres'],
    ['tls', ['postgresql'], undefined, 'postgres'],
    ['postgres', ['postgresql'], undefined, 'postgres'],
    ['postgres', [], undefined, 'postgres-startup'],
    ['postgres', ['http/1.1'], undefined, 'postgres-startup'],
    ['tls', ['gate-postgres-ping', 'gate-postgres'], undefined, 'postgres-ping'],
    ['tls', ['gate-mysql'], undefined, 'mysql'],
    ['tls', ['gate-mysql-ping'], undefined, 'mysql-ping'],
    ['tls', ['gate-mysql-OC4wLjM2'], undefined, 'mysql-versioned'],
    ['tls', ['gate-mongodb-ping'], undefined, 'mongodb-ping'],
    ['tls', ['gate-redis'], undefined, 'redis'],
    ['silent', [], undefined, undefined],
  ];
  for (const [protocol, alpn, sni, expected] of cases) {
    t.equal(pick(protocol, alpn, sni), expected, `${protocol} ${alpn.join(',') || '-'} ${sni ?? '-'}`);
  }
});

t.test("separate: what each port's route table picks", async (t) => {
  const { config } = parseConfig(`auth_service: {proxy_listener_mode: separate}\nproxy_service:\n${ALL_UPSTREAMS}`);
  const { listeners } = planListeners(config);
  const web = table(byName(listeners, 'web'));
  t.equal(web('ssh'), undefined, 'no plaintext SSH on the web port');
  t.equal(web('postgres'), undefined, 'no plaintext Postgres on the web port');
  t.equal(web('tls', ['gate-postgres']), 'postgres', 'Postgres by ALPN still on the web port');
  t.equal(web('http1'), 'web-plaintext');
  const pg = table(byName(listeners, 'postgres'));
  t.equal(pg('postgres'), 'postgres');
  t.equal(pg('postgres', ['postgresql']), 'postgres');
  t.equal(pg('tls', ['postgresql']), 'postgres-tls', 'direct SSL');
  t.equal(pg('ssh'), undefined);
  const mysql = table(byName(listeners, 'mysql'));
  t.equal(mysql('silent'), 'mysql');
  const kube = table(byName(listeners, 'kube'));
  t.equal(kube('tls', ['h2'], 'anything.example.com'), 'kube');
});
