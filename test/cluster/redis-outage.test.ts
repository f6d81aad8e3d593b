// Redis down and back, with a real redis-server, a real GateProxy configured with
// `cluster.store: redis://…` and a real agent: store operations fail fast with
// GATE_ERR_STORE_UNAVAILABLE, the local tunnel keeps carrying clients, and once redis-server is
// restarted on the same port (empty: no persistence) the proxy re-registers its presence and its
// agent's tunnel by itself. Also: a password in the URL, and a wrong one; rediss:// with a private CA.
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RedisRouteStore } from '../../lib/cluster/redis-route-store.js';
import { routeStoreFor } from '../../lib/cluster/store-for-config.js';
import { parseConfig } from '../../lib/config/load.js';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { ErrorCodes, isGateError, type GateError } from '../../lib/errors.js';
import { captureLogs } from '../hardening/log-capture.js';
import { joinedAgent } from '../helpers/cluster.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { closeServer, tlsClient, readUntil, startTaggedTcpServer, until } from '../helpers/net.js';
import { startRedis } from '../helpers/redis.js';
import { tempDir } from '../helpers/temp-dir.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

/** Whether `operation` failed with GATE_ERR_STORE_UNAVAILABLE rather than hanging; `limitMs` only catches a hang. */
async function failsFast(operation: Promise<unknown>, limitMs = 10_000): Promise<{ code: string | undefined; ms: number }> {
  const start = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<'hang'>((resolve) => (timer = setTimeout(() => resolve('hang'), limitMs)));
  const outcome = await Promise.race([
    operation.then(
      () => 'resolved' as const,
      (err: unknown) => err,
    ),
    hang,
  ]);
  clearTimeout(timer);
  return { code: isGateError(outcome) ? outcome.code : String(outcome), ms: Date.now() - start };
}

t.test('Redis stopped and restarted: fast failures, local tunnels unaffected, everything re-registered', async (t) => {
  const redis = await startRedis(t);
  if (!redis) return;
  const tagged = await startTaggedTcpServer('behind-the-agent');
  t.teardown(() => closeServer(tagged.server));
  const target = `127.0.0.1:${tagged.port}`;
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { redis: `tunnel:edge/${target}` },
    cluster: { store: `redis://${redis.host}:${redis.port}/3`, presence_ttl: '1500ms' },
  });
  t.ok(gate.proxy.routeStore instanceof RedisRouteStore, 'cluster.store chose the Redis store');
  t.ok(proxyParts(gate.proxy).cluster.registered, 'registered at start');
  const observer = new RedisRouteStore({ host: redis.host, port: redis.port, db: 3 });
  t.teardown(() => observer.close());
  t.ok(await observer.ready(5000));
  t.same(
    (await observer.proxies()).map((p) => p.id),
    [gate.proxy.proxyId],
    'another client of the same Redis sees the proxy',
  );

  await (await joinedAgent(t, gate, 'edge', [target])).connect();
  t.same(await observer.holders('edge'), [{ agent: 'edge', proxyId: gate.proxy.proxyId, generation: 1 }]);

  // Connected but silent: the command timeout (2 s by default) ends the wait.
  redis.pause();
  const silent = await failsFast(gate.proxy.routeStore.holders('edge'));
  redis.resume();
  t.equal(silent.code, ErrorCodes.STORE_UNAVAILABLE, 'a Redis that does not answer fails with the code, not a hang');
  t.comment(`holders failed after ${silent.ms} ms with Redis stopped (SIGSTOP)`);

  const errors: GateError[] = [];
  proxyParts(gate.proxy).cluster.on('store-error', (err: GateError) => errors.push(err));
  await redis.stop();

  for (const [what, operation] of [
    ['proxies', () => gate.proxy.routeStore.proxies()],
    ['holders', () => gate.proxy.routeStore.holders('edge')],
    ['announce', () => observer.announce({ id: 'x', peerAddr: '', version: '1', draining: false, channelFingerprint: '' }, 1000)],
  ] as const) {
    const { code, ms } = await failsFast(operation());
    t.equal(code, ErrorCodes.STORE_UNAVAILABLE, `${what} fails with the code, not a hang`);
    t.comment(`${what} failed after ${ms} ms with Redis down`);
  }
  await until(() => errors.length > 0, 'the member reporting the outage');
  t.ok(errors.every((e) => e.code === ErrorCodes.STORE_UNAVAILABLE));
  await until(() => !proxyParts(gate.proxy).cluster.registered, 'registered turning false once a TTL passed without an announce');

  // The local tunnel does not need the store.
  const client = await tlsClient(gate.port('multiplex'), { servername: 'localhost', ca: gate.ca, ALPNProtocols: ['gate-redis'] });
  t.equal(
    (await readUntil(client, (s) => s.includes('\n'))).trim(),
    'behind-the-agent',
    'a client reaches the local agent while Redis is down',
  );
  client.destroy();

  // Back on the same port with no data at all: the proxy re-registers by itself.
  await redis.restart();
  await until(async () => (await observer.proxies()).some((p) => p.id === gate.proxy.proxyId), 'the presence re-announced');
  await until(async () => (await observer.holders('edge')).length === 1, 'the tunnel re-registered');
  t.same(
    await observer.holders('edge'),
    [{ agent: 'edge', proxyId: gate.proxy.proxyId, generation: 1 }],
    'the same tunnel, the same generation',
  );
  await until(() => proxyParts(gate.proxy).cluster.registered, 'registered again');
  t.pass('re-registered without a restart');

  // Closing while Redis is down never hangs: the withdrawal fails fast and is left to the TTL.
  await redis.stop();
  const closing = Date.now();
  await gate.proxy.close({ graceMs: 0 });
  t.pass('close resolved');
  t.comment(`close took ${Date.now() - closing} ms with Redis down`);
});

t.test('a password in the URL; a wrong one fails with the code and never shows it', async (t) => {
  const redis = await startRedis(t, { password: 'right-horse-battery' });
  if (!redis) return;
  const good = parseConfig(`cluster:\n  store: redis://:right-horse-battery@${redis.host}:${redis.port}\n`).config;
  const store = await routeStoreFor(good.cluster);
  t.teardown(() => store.close());
  await store.announce({ id: 'p', peerAddr: '', version: '1', draining: false, channelFingerprint: '' }, 10_000);
  t.same(
    (await store.proxies()).map((p) => p.id),
    ['p'],
    'authenticated',
  );

  const bad = parseConfig(`cluster:\n  store: redis://:wrong-staple-secret@${redis.host}:${redis.port}\n`).config;
  const logs = captureLogs();
  const refused = await routeStoreFor(bad.cluster, logs.logger);
  t.teardown(() => refused.close());
  const err = (await refused.proxies().catch((e: unknown) => e)) as GateError;
  t.equal(err.code, ErrorCodes.STORE_UNAVAILABLE);
  t.notOk(err.message.includes('wrong-staple-secret'), err.message);
  t.match(err.message, /redis:\/\/:\*\*\*@127\.0\.0\.1/, 'the message names the store with the password hidden');
  t.match(err.message, /WRONGPASS/, 'and says why it is not connected');

  // A whole proxy on the wrong password, and on a Redis nobody listens on: its logs name the store, never the password.
  const proxy = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    cluster: { store: `redis://:wrong-staple-secret@${redis.host}:${redis.port}` },
    logger: logs.logger,
  });
  t.notOk(proxyParts(proxy.proxy).cluster.registered, 'not registered with the wrong password');
  await proxy.proxy.close({ graceMs: 0 });
  const nobody = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    cluster: { store: `redis://:wrong-staple-secret@127.0.0.1:1` },
    logger: logs.logger,
  });
  await nobody.proxy.close({ graceMs: 0 });
  t.match(logs.text(), /GATE_ERR_STORE_UNAVAILABLE/, 'the failures are logged with their code');
  t.match(logs.text(), /redis:\/\/:\*\*\*@127\.0\.0\.1/);
  t.notOk(logs.text().includes('wrong-staple-secret'), 'no log line carries the password');
});

t.test('an unreadable store_ca_file stops the start with GATE_ERR_CONFIG_INVALID', async (t) => {
  const config = parseConfig('cluster:\n  store: rediss://127.0.0.1:1\n  store_ca_file: /nonexistent/redis-ca.pem\n').config;
  await t.rejects(routeStoreFor(config.cluster), {
    code: ErrorCodes.CONFIG_INVALID,
    message: /cluster\.store_ca_file: cannot read \/nonexistent\/redis-ca\.pem \(ENOENT\)/,
  });
});

t.test('rediss:// with store_ca_file: TLS to Redis verified against a private CA; another CA is refused', async (t) => {
  const dir = await tempDir(t, 'redis-tls');
  const ca = CertificateAuthority.create('redis test CA');
  const server = ca.issue({ commonName: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  const files = {
    certFile: join(dir, 'redis.pem'),
    keyFile: join(dir, 'redis-key.pem'),
    caFile: join(dir, 'ca.pem'),
    otherCa: join(dir, 'other-ca.pem'),
  };
  await writeFile(files.certFile, server.cert);
  await writeFile(files.keyFile, server.key, { mode: 0o600 });
  await writeFile(files.caFile, ca.cert);
  await writeFile(files.otherCa, CertificateAuthority.create('someone else').cert);
  const redis = await startRedis(t, { tls: files });
  if (!redis) return;

  const trusted = parseConfig(`cluster:\n  store: rediss://localhost:${redis.port}\n  store_ca_file: ${files.caFile}\n`).config;
  const store = await routeStoreFor(trusted.cluster);
  t.teardown(() => store.close());
  await store.announce({ id: 'over-tls', peerAddr: '', version: '1', draining: false, channelFingerprint: '' }, 10_000);
  t.same(
    (await store.proxies()).map((p) => p.id),
    ['over-tls'],
    'records written over TLS',
  );

  const untrusted = parseConfig(`cluster:\n  store: rediss://localhost:${redis.port}\n  store_ca_file: ${files.otherCa}\n`).config;
  const refused = await routeStoreFor(untrusted.cluster);
  t.teardown(() => refused.close());
  const err = (await refused.proxies().catch((e: unknown) => e)) as GateError;
  t.equal(err.code, ErrorCodes.STORE_UNAVAILABLE);
  t.match(err.message, /not connected \(.*(certificate|self.signed|verify)/i, 'the certificate is why');
});
