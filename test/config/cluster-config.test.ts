// The `cluster` section and `proxy_service.peer_public_addr`: the route store's URL forms,
// the presence TTL, and errors that name the key without ever echoing a Redis password.
import t from 'tap';
import { ConfigError, parseConfig } from '../../lib/config/load.js';
import { parseStoreUrl } from '../../lib/config/store-url.js';

function problems(yaml: string): Array<{ path: string; message: string }> {
  try {
    parseConfig(yaml, { source: 'cluster.yaml' });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.map((p) => ({ path: p.path, message: p.message }));
    throw err;
  }
  return [];
}

t.test('defaults: the memory store, a 10 s presence, no peer_public_addr', async (t) => {
  const { config, warnings } = parseConfig('');
  t.same(config.cluster, { store: { kind: 'memory' }, storeCaFile: undefined, presenceTtlMs: 10_000 });
  t.equal(config.proxy.peerPublicAddr, undefined);
  t.same(warnings, []);
  t.same(parseConfig('cluster:\n').config.cluster.store, { kind: 'memory' }, 'an empty section is the defaults');
  t.same(parseConfig('cluster: {store: memory}\n').config.cluster.store, { kind: 'memory' });
});

t.test('redis URL forms', async (t) => {
  const cases: Array<[string, Record<string, unknown>]> = [
    [
      'redis://127.0.0.1',
      { tls: false, host: '127.0.0.1', port: 6379, db: 0, username: undefined, password: undefined, label: 'redis://127.0.0.1' },
    ],
    ['redis://redis.internal:6380/2', { tls: false, host: 'redis.internal', port: 6380, db: 2, label: 'redis://redis.internal:6380/2' }],
    ['redis://:s3cret@10.0.0.5:6379', { password: 's3cret', username: undefined, label: 'redis://:***@10.0.0.5:6379' }],
    [
      'rediss://gate:p%40ss@redis.internal/1',
      { tls: true, username: 'gate', password: 'p@ss', db: 1, label: 'rediss://gate:***@redis.internal/1' },
    ],
    ['redis://[::1]:7000', { host: '::1', port: 7000 }],
  ];
  for (const [url, expected] of cases) {
    const { config } = parseConfig(`cluster:\n  store: "${url}"\n`);
    t.match(config.cluster.store, { kind: 'redis', ...expected }, url);
  }
  const withCa = parseConfig('cluster:\n  store: rediss://redis.internal\n  store_ca_file: /etc/gate/redis-ca.pem\n  presence_ttl: 6s\n')
    .config.cluster;
  t.equal(withCa.storeCaFile, '/etc/gate/redis-ca.pem');
  t.equal(withCa.presenceTtlMs, 6000);
});

t.test('invalid cluster settings name the key and what was expected', async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ['cluster: [a]\n', 'cluster', /expected a mapping/],
    ['cluster:\n  store: http://redis.internal\n', 'cluster.store', /scheme "http:" is neither redis: nor rediss:/],
    ['cluster:\n  store: redis\n', 'cluster.store', /not a URL/],
    ['cluster:\n  store: 6379\n', 'cluster.store', /expected memory, redis:\/\//],
    ['cluster:\n  store: redis://host/db1\n', 'cluster.store', /database number/],
    ['cluster:\n  store: redis://host:0\n', 'cluster.store', /port 0/],
    ['cluster:\n  store: redis://host/0?timeout=1\n', 'cluster.store', /query or fragment/],
    ['cluster:\n  store: redis://host\n  store_ca_file: /ca.pem\n', 'cluster.store_ca_file', /only read with store: rediss:/],
    ['cluster:\n  presence_ttl: 500ms\n', 'cluster.presence_ttl', /at least 1s/],
    ['cluster:\n  presence_ttl: soon\n', 'cluster.presence_ttl', /expected a duration/],
    ['cluster:\n  stor: memory\n', 'cluster.stor', /did you mean "store"/],
    ['proxy_service:\n  store: memory\n', 'proxy_service.store', /belongs under cluster/],
    ['cluster:\n  peer_public_addr: a:1\n', 'cluster.peer_public_addr', /belongs under proxy_service/],
    ['proxy_service:\n  peer_public_addr: 0.0.0.0:3021\n', 'proxy_service.peer_public_addr', /wildcard/],
    ['proxy_service:\n  peer_public_addr: "a b"\n', 'proxy_service.peer_public_addr', /host\[:port\] other proxies can dial/],
  ];
  for (const [yaml, path, says] of cases) {
    const found = problems(yaml);
    const problem = found.find((p) => p.path === path);
    t.ok(problem, `${JSON.stringify(yaml)} names ${path}: ${JSON.stringify(found)}`);
    t.match(problem?.message, says, path);
  }
});

t.test('a Redis password never appears in an error', async (t) => {
  const found = problems('cluster:\n  store: "redis://:hunter2-secret@host/db?x=1"\n');
  t.equal(found.length, 1);
  t.notOk(JSON.stringify(found).includes('hunter2'), JSON.stringify(found));
  const parsed = parseStoreUrl('redis://user:hunter2-secret@host');
  t.ok(parsed.ok && parsed.store.kind === 'redis' && !parsed.store.label.includes('hunter2'), 'the label hides it');
});

t.test('presence_ttl above the 15 s aim is a warning; peer_public_addr defaults its port to 3021', async (t) => {
  const { config, warnings } = parseConfig('cluster:\n  presence_ttl: 30s\nproxy_service:\n  peer_public_addr: proxy-1.internal\n');
  t.equal(config.cluster.presenceTtlMs, 30_000);
  t.match(warnings.join('\n'), /cluster\.presence_ttl: a crashed proxy is dialled until its presence expires/);
  t.same(config.proxy.peerPublicAddr, { host: 'proxy-1.internal', port: 3021 });
});
