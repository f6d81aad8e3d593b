import t, { type Test } from 'tap';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { request } from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { connect, createServer, type Socket } from 'node:net';
import { parseConfig } from '../../lib/config/load.js';
import { GateProxy } from '../../lib/proxy/gate-proxy.js';
import { lengthPrefix } from '../../lib/length-prefix/ping-frames.js';
import { freePort } from '../helpers/daemon.js';
import { closeServer, listening, readUntil, startTaggedTcpServer, startTaggedTlsServer, tcpClient } from '../helpers/net.js';
import { tempDir } from '../helpers/temp-dir.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

/** A plaintext upstream that records what it receives and echoes it. */
async function recordingServer(): Promise<{ port: number; received: () => string; close: () => Promise<void> }> {
  let received = '';
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      s.write(d);
    });
  });
  const port = await listening(server);
  return {
    port,
    received: () => received,
    close: () => {
      for (const s of sockets) s.destroy();
      return closeServer(server);
    },
  };
}

const ssh = await startTaggedTcpServer('SSH-2.0-upstream-one');
const ssh2 = await startTaggedTcpServer('SSH-2.0-upstream-two');
const mysql = await startTaggedTcpServer('MYSQL-HANDSHAKE');
const postgres = await recordingServer();
const redis = await recordingServer();
const kube = await startTaggedTlsServer('KUBE');
const dataDir = await tempDir(t, 'proxy-test');
t.teardown(async () => {
  await Promise.all([
    closeServer(ssh.server),
    closeServer(ssh2.server),
    closeServer(mysql.server),
    closeServer(kube.server),
    postgres.close(),
    redis.close(),
  ]);
});

function yaml(mode: 'multiplex' | 'separate', sshPort = ssh.port): string {
  const own =
    mode === 'separate'
      ? [
          '  listen_addr: 127.0.0.1:0',
          '  mysql_listen_addr: 127.0.0.1:0',
          '  postgres_listen_addr: 127.0.0.1:0',
          '  tunnel_listen_addr: 127.0.0.1:0',
          '  kube_listen_addr: 127.0.0.1:0',
          '  redis_listen_addr: 127.0.0.1:0',
          '  mongo_listen_addr: 127.0.0.1:0',
        ]
      : [];
  return [
    'version: v3',
    `data_dir: ${dataDir}`,
    'auth_service:',
    `  proxy_listener_mode: ${mode}`,
    'proxy_service:',
    '  web_listen_addr: 127.0.0.1:0',
    '  public_addr: [gate.example.com:443, other.example.com:443]',
    ...own,
    '  upstreams:',
    `    ssh: 127.0.0.1:${sshPort}`,
    `    postgres: 127.0.0.1:${postgres.port}`,
    `    mysql: 127.0.0.1:${mysql.port}`,
    `    redis: 127.0.0.1:${redis.port}`,
    `    kube: 127.0.0.1:${kube.port}`,
    '  automatic_upgrades_channels:',
    '    stable/cloud:',
    '      static_version: v1.2.4',
    '',
  ].join('\n');
}

function get(port: number, path: string, ca: string): Promise<{ status: number; body: string; type: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, ca, servername: 'localhost' }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, type: res.headers['content-type'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function tlsTo(port: number, ca: string, options: { servername?: string; ALPNProtocols?: string[]; socket?: Socket }) {
  const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost', ...options });
  await Promise.race([once(socket, 'secureConnect'), once(socket, 'error').then(([e]) => Promise.reject(e))]);
  return socket;
}

t.test('multiplex mode: one port serves web, SSH, Postgres, Redis-ping, MySQL ALPN and kube passthrough', async (t) => {
  const proxy = await GateProxy.start({ config: parseConfig(yaml('multiplex')).config, version: '0.1.0' });
  t.teardown(() => proxy.close({ graceMs: 100 }));
  const [listener] = proxyParts(proxy).plan.listeners;
  const port = listener!.port;
  t.equal(proxyParts(proxy).plan.listeners.length, 1, 'one listener');
  t.same(proxy.listening, [{ name: 'multiplex', host: '127.0.0.1', port }], 'listening: the bound port, plain types');
  t.not(port, 0, 'the port the system chose');
  const ca = readFileSync(proxy.caFile!, 'utf8');

  const ping = await get(port, '/webapi/ping', ca);
  t.equal(ping.status, 200);
  const body = JSON.parse(ping.body);
  t.equal(body.proxy.tls_routing_enabled, true);
  t.equal(body.proxy.ssh.listen_addr, `127.0.0.1:${port}`, 'with TLS routing every listen address is the web address');
  t.equal(body.proxy.db.postgres_listen_addr, `127.0.0.1:${port}`);
  t.equal(body.proxy.ssh.public_addr, 'gate.example.com:443', 'the first public address');
  t.equal(body.server_version, '0.1.0');

  t.same(await get(port, '/v1/webapi/automaticupgrades/channel/default/version', ca), {
    status: 200,
    body: 'v0.1.0',
    type: 'text/plain; charset=utf-8',
  });
  t.equal((await get(port, '/v1/webapi/automaticupgrades/channel/stable/cloud/version', ca)).body, 'v1.2.4');
  t.equal((await get(port, '/v1/webapi/automaticupgrades/channel/nope/version', ca)).status, 404);
  t.equal((await get(port, '/nothing-here', ca)).status, 404);

  const plainSsh = await tcpClient(port);
  plainSsh.write('SSH-2.0-client\r\n');
  t.equal(await readUntil(plainSsh, (s) => s.includes('client')), 'SSH-2.0-upstream-one\nSSH-2.0-client\r\n', 'plaintext SSH forwarded');
  plainSsh.destroy();

  const tlsSsh = await tlsTo(port, ca, { ALPNProtocols: ['gate-proxy-ssh'] });
  t.equal(tlsSsh.alpnProtocol, 'gate-proxy-ssh');
  tlsSsh.write('SSH-2.0-inside-tls\r\n');
  t.match(await readUntil(tlsSsh, (s) => s.includes('inside-tls')), /^SSH-2.0-upstream-one\n/, 'SSH inside TLS terminated and forwarded');
  tlsSsh.destroy();

  // psql's path: SSLRequest answered 'S', TLS terminated, the startup message reaches Postgres in clear.
  const raw = await tcpClient(port);
  raw.write(SSL_REQUEST);
  const [answer] = (await once(raw, 'data')) as [Buffer];
  t.equal(answer.toString(), 'S');
  raw.pause();
  const pg = await tlsTo(port, ca, { socket: raw });
  pg.write('startup-message');
  t.equal(await readUntil(pg, (s) => s.includes('startup-message')), 'startup-message');
  t.equal(postgres.received(), 'startup-message', 'the upstream got cleartext and no SSLRequest');
  pg.destroy();

  const redisPing = await tlsTo(port, ca, { ALPNProtocols: ['gate-redis-ping'] });
  t.equal(redisPing.alpnProtocol, 'gate-redis-ping');
  redisPing.write(Buffer.concat([lengthPrefix(0), lengthPrefix(4), Buffer.from('PING')]));
  const framed = await new Promise<Buffer>((resolve) => {
    let buf = Buffer.alloc(0);
    redisPing.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 8) resolve(buf);
    });
  });
  t.same([...framed.subarray(0, 8)], [0, 0, 0, 4, 0x50, 0x49, 0x4e, 0x47], 'the answer comes back framed');
  t.equal(redis.received(), 'PING', 'the upstream saw the payload without frames or keep-alives');
  redisPing.destroy();

  const mysqlVersioned = await tlsTo(port, ca, { ALPNProtocols: ['gate-mysql-OC4wLjMy'] });
  t.equal(mysqlVersioned.alpnProtocol, 'gate-mysql-OC4wLjMy', 'the versioned MySQL ALPN is echoed back');
  t.equal(await readUntil(mysqlVersioned, (s) => s.includes('\n')), 'MYSQL-HANDSHAKE\n');
  mysqlVersioned.destroy();

  const kubeSocket = tlsConnect({ host: '127.0.0.1', port, servername: 'kube-gate-proxy-alpn.cluster.test', rejectUnauthorized: false });
  await once(kubeSocket, 'secureConnect');
  t.match(
    await readUntil(kubeSocket, (s) => s.includes('\n')),
    /^KUBE sni=kube-gate-proxy-alpn\.cluster\.test/,
    'kube TLS passed through to the upstream',
  );
  kubeSocket.destroy();

  const refused = await tlsTo(port, ca, { ALPNProtocols: ['unknown-protocol'] }).then(
    () => undefined,
    (e: NodeJS.ErrnoException) => e,
  );
  t.match(String(refused?.code), /NO_APPLICATION_PROTOCOL/, 'an unknown ALPN is refused');
});

t.test('separate mode: each protocol on its own port; MySQL forwarded without waiting for the client', async (t) => {
  const proxy = await GateProxy.start({ config: parseConfig(yaml('separate')).config, version: '0.1.0' });
  t.teardown(() => proxy.close({ graceMs: 100 }));
  const byName = Object.fromEntries(proxyParts(proxy).plan.listeners.map((l) => [l.name, l.port]));
  t.ok(byName.web && byName.ssh && byName.mysql && byName.postgres, 'web, ssh, mysql and postgres ports');
  const ca = readFileSync(proxy.caFile!, 'utf8');
  const body = JSON.parse((await get(byName.web!, '/webapi/ping', ca)).body);
  t.equal(body.proxy.tls_routing_enabled, false);
  t.equal(body.proxy.ssh.listen_addr, `127.0.0.1:${byName.ssh}`);
  t.equal(body.proxy.db.mysql_listen_addr, `127.0.0.1:${byName.mysql}`);

  const mysqlClient = await tcpClient(byName.mysql!);
  t.equal(
    await readUntil(mysqlClient, (s) => s.includes('\n')),
    'MYSQL-HANDSHAKE\n',
    'server greeting arrives though the client said nothing',
  );
  mysqlClient.destroy();

  const sshClient = await tcpClient(byName.ssh!);
  sshClient.write('SSH-2.0-own-port\r\n');
  t.match(await readUntil(sshClient, (s) => s.includes('own-port')), /^SSH-2.0-upstream-one\n/);
  sshClient.destroy();
});

t.test('reload: established connections keep their upstream, new ones follow the new routes', async (t) => {
  const proxy = await GateProxy.start({ config: parseConfig(yaml('multiplex')).config, version: '0.1.0' });
  t.teardown(() => proxy.close({ graceMs: 100 }));
  const port = proxyParts(proxy).plan.listeners[0]!.port;
  const before = await tcpClient(port);
  before.write('SSH-2.0-before\r\n');
  t.match(await readUntil(before, (s) => s.includes('before')), /upstream-one/);

  await proxy.reload(parseConfig(yaml('multiplex', ssh2.port)).config);
  t.equal(proxyParts(proxy).plan.listeners[0]!.port, port, 'same listener, same port');

  const after = await tcpClient(port);
  after.write('SSH-2.0-after\r\n');
  t.match(await readUntil(after, (s) => s.includes('after')), /^SSH-2.0-upstream-two\n/, 'new connection follows the new route');
  before.write('still here');
  t.match(await readUntil(before, (s) => s.includes('still here')), /still here/, 'the old connection still flows');
  before.destroy();
  after.destroy();
});

t.test('a reload with a broken configuration leaves the running proxy untouched', async (t) => {
  const proxy = await GateProxy.start({ config: parseConfig(yaml('multiplex')).config, version: '0.1.0' });
  t.teardown(() => proxy.close({ graceMs: 100 }));
  const port = proxyParts(proxy).plan.listeners[0]!.port;
  const broken = parseConfig(
    yaml('multiplex').replace('https_keypairs', 'x') +
      '  https_keypairs:\n    - cert_file: /nonexistent/cert.pem\n      key_file: /nonexistent/key.pem\n',
  ).config;
  await t.rejects(proxy.reload(broken), { code: 'GATE_ERR_CONFIG_INVALID' });
  const client = await tcpClient(port);
  client.write('SSH-2.0-x\r\n');
  t.match(await readUntil(client, (s) => s.includes('SSH-2.0-x')), /upstream-one/, 'still routing with the old configuration');
  client.destroy();
});

t.test('reload is all or nothing: a new port that is taken leaves the old configuration running and nothing new open', async (t) => {
  const proxy = await GateProxy.start({ config: parseConfig(yaml('multiplex')).config, version: '0.1.0' });
  t.teardown(() => proxy.close({ graceMs: 100 }));
  const port = proxyParts(proxy).plan.listeners[0]!.port;
  const ca = readFileSync(proxy.caFile!, 'utf8');
  const taken = createServer();
  const takenPort = await listening(taken);
  t.teardown(() => closeServer(taken));
  const wouldOpen = await freePort('127.0.0.1');
  // Separate mode on the same web port, the SSH port free and the MySQL port taken, and SSH to
  // another upstream: had anything been swapped before the failure, it would show.
  const next = yaml('separate', ssh2.port)
    .replace('  listen_addr: 127.0.0.1:0', `  listen_addr: 127.0.0.1:${wouldOpen}`)
    .replace('  mysql_listen_addr: 127.0.0.1:0', `  mysql_listen_addr: 127.0.0.1:${takenPort}`)
    .replace('web_listen_addr: 127.0.0.1:0', `web_listen_addr: 127.0.0.1:${port}`);
  await t.rejects(proxy.reload(parseConfig(next).config), {
    code: 'GATE_ERR_LISTEN_FAILED',
    message: /mysql_listen_addr: cannot listen on 127\.0\.0\.1:\d+ \(EADDRINUSE\)/,
  });

  t.same(
    proxyParts(proxy).plan.listeners.map((l) => [l.name, l.port]),
    [['multiplex', port]],
    'the plan is the old one',
  );
  const client = await tcpClient(port);
  client.write('SSH-2.0-x\r\n');
  t.match(await readUntil(client, (s) => s.includes('SSH-2.0-x')), /^SSH-2.0-upstream-one\n/, 'the old routes, the old upstream');
  client.destroy();
  const ping = JSON.parse((await get(port, '/webapi/ping', ca)).body);
  t.equal(ping.proxy.tls_routing_enabled, true, 'ping still describes the old configuration');
  const refused = await new Promise<string>((resolve) => {
    const probe = connect({ host: '127.0.0.1', port: wouldOpen });
    probe.on('connect', () => {
      probe.destroy();
      resolve('connected');
    });
    probe.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
  t.equal(refused, 'ECONNREFUSED', 'the listener that did bind was closed again');

  // The same reload once the port is free goes through, on the same web socket.
  await closeServer(taken);
  await proxy.reload(parseConfig(next.replace(`mysql_listen_addr: 127.0.0.1:${takenPort}`, 'mysql_listen_addr: 127.0.0.1:0')).config);
  t.same(proxyParts(proxy).plan.listeners.find((l) => l.name === 'web')?.port, port, 'the shared port stayed bound under its new name');
  t.equal(proxyParts(proxy).plan.listeners.find((l) => l.name === 'ssh')?.port, wouldOpen);
});

t.test('a start whose second listener cannot bind closes the first and fails', async (t) => {
  const taken = createServer();
  const takenPort = await listening(taken);
  t.teardown(() => closeServer(taken));
  const webPort = await freePort('127.0.0.1');
  const config = yaml('separate')
    .replace('web_listen_addr: 127.0.0.1:0', `web_listen_addr: 127.0.0.1:${webPort}`)
    .replace('  mysql_listen_addr: 127.0.0.1:0', `  mysql_listen_addr: 127.0.0.1:${takenPort}`);
  await t.rejects(GateProxy.start({ config: parseConfig(config).config, version: '0.1.0' }), { code: 'GATE_ERR_LISTEN_FAILED' });
  const again = createServer();
  t.equal(
    await new Promise<number>((resolve, reject) => {
      again.once('error', reject);
      again.listen(webPort, '127.0.0.1', () => resolve((again.address() as { port: number }).port));
    }),
    webPort,
    'the web port was released',
  );
  await closeServer(again);
});

/** A multiplex configuration with the given proxy_service lines added. */
function tuned(lines: string[]): string {
  return yaml('multiplex').replace('proxy_service:\n', `proxy_service:\n${lines.map((l) => `  ${l}\n`).join('')}`);
}

/** Past its deadline, a close may come this much later before the wait is questioned. */
const DEADLINE_SLACK_MS = 1000;
/** How long a wait may last at all: far below the 120 s deadline a reload must have replaced. */
const WAIT_CAP_MS = 10_000;

/**
 * Waits for `socket` to close, then checks that it closed by a deadline of `deadlineMs` (0: a
 * refusal, at once): never before half of it (the proxy's last activity precedes what the test
 * saw), and within DEADLINE_SLACK_MS after it. A close past that bound is blamed on the machine
 * only when this process's own event loop, which the proxy runs in, stalled as long meanwhile:
 * the ping guard's rule (test/helpers/ping-guard.ts), so a loaded, shared machine reports a
 * comment, while a deadline that did not apply (the 120 s one from before the reload) fails,
 * at WAIT_CAP_MS at the latest. Returns the milliseconds waited.
 */
async function closedWithin(t: Test, socket: Socket, deadlineMs: number, what: string): Promise<number> {
  const started = performance.now();
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  let cap: NodeJS.Timeout | undefined;
  const closed = socket.destroyed
    ? true
    : await Promise.race([
        once(socket, 'close').then(() => true),
        new Promise<false>((resolve) => (cap = setTimeout(() => resolve(false), WAIT_CAP_MS))),
      ]);
  clearTimeout(cap);
  loop.disable();
  const waited = performance.now() - started;
  const stalledMs = loop.max / 1e6;
  t.ok(closed, `${what}: closed within ${WAIT_CAP_MS} ms`);
  t.ok(waited >= deadlineMs / 2, `${what}: not before its deadline (${Math.round(waited)} ms, deadline ${deadlineMs} ms)`);
  const late = waited - deadlineMs - DEADLINE_SLACK_MS;
  if (late <= 0) t.pass(`${what}: within ${DEADLINE_SLACK_MS} ms of its deadline`);
  else if (closed && stalledMs >= late)
    t.comment(`${what}: ${Math.round(waited)} ms, but the event loop stalled ${Math.round(stalledMs)} ms: the machine was busy`);
  else t.fail(`${what}: ${Math.round(waited)} ms, ${Math.round(late)} ms past the bound with the loop never stalled that long`);
  return waited;
}

t.test('reload: changed timeouts, limits and PROXY protocol apply to new connections on a listener that stays', async (t) => {
  const { captureLogs } = await import('../hardening/log-capture.js');
  const { logger, lines } = captureLogs();
  // A long first deadline: the undecided connection from before must outlive every step below.
  const proxy = await GateProxy.start({ config: parseConfig(tuned(['detect_timeout: 120s'])).config, version: '0.1.0', logger });
  t.teardown(() => proxy.close({ graceMs: 100 }));
  const port = proxyParts(proxy).plan.listeners[0]!.port;
  t.match(
    lines.find((l) => l.msg.startsWith('connection cap')),
    { maxConnections: proxy.connectionCap.cap, capFrom: /open-file limit \d+/ },
    'the derived cap is logged at start',
  );

  // Opened under the old settings: one undecided, one routed.
  const undecidedBefore = await tcpClient(port);
  undecidedBefore.on('error', () => {});
  undecidedBefore.write(Buffer.from([0x16, 0x03]));
  const routedBefore = await tcpClient(port);
  routedBefore.write('SSH-2.0-before\r\n');
  await readUntil(routedBefore, (s) => s.includes('before'));

  await proxy.reload(
    parseConfig(tuned(['detect_timeout: 200ms', 'idle_timeout: 300ms', 'max_connections: 50', 'max_connections_per_source: 3'])).config,
  );
  t.equal(proxyParts(proxy).plan.listeners[0]!.port, port, 'the same listener');
  t.same(proxy.connectionCap, { cap: 50, from: 'proxy_service.max_connections' }, 'the new cap');

  const undecidedAfter = await tcpClient(port);
  undecidedAfter.on('error', () => {});
  undecidedAfter.write(Buffer.from([0x16, 0x03]));
  await closedWithin(t, undecidedAfter, 200, 'a new undecided connection meets the new 200 ms detection deadline');
  const routedAfter = await tcpClient(port);
  routedAfter.write('SSH-2.0-after\r\n');
  await readUntil(routedAfter, (s) => s.includes('after'));
  await closedWithin(t, routedAfter, 300, 'a new routed connection meets the new 300 ms idle timeout');
  t.notOk(undecidedBefore.destroyed, 'the undecided one from before keeps its 120 s deadline');
  routedBefore.write('still here');
  t.match(await readUntil(routedBefore, (s) => s.includes('still here')), /still here/, 'the routed one from before has no idle timeout');
  const stats = proxy.stats().multiplex!;
  t.equal(stats.failures.GATE_ERR_DETECT_TIMEOUT, 1);
  t.equal(stats.failures.GATE_ERR_IDLE_TIMEOUT, 1);

  // Per source: two from before and this one make three; the fourth is refused.
  const third = await tcpClient(port);
  const fourth = await tcpClient(port);
  await closedWithin(t, fourth, 0, 'the fourth from one source');
  t.equal(proxy.stats().multiplex!.failures.GATE_ERR_TOO_MANY_FROM_SOURCE, 1, 'max_connections_per_source applies');
  third.destroy();

  // PROXY protocol on, trusting loopback: a connection without a header is refused now.
  await proxy.reload(parseConfig(tuned(['proxy_protocol: on', 'proxy_protocol_trusted_networks: [127.0.0.0/8]'])).config);
  const bare = await tcpClient(port);
  bare.on('error', () => {});
  bare.write('SSH-2.0-bare\r\n');
  await closedWithin(t, bare, 0, 'a connection without a PROXY header');
  t.equal(proxy.stats().multiplex!.failures.GATE_ERR_PROXY_HEADER_MISSING, 1, 'PROXY protocol now required');
  const behindBalancer = await tcpClient(port);
  behindBalancer.write('PROXY TCP4 192.0.2.7 192.0.2.1 4000 443\r\nSSH-2.0-lb\r\n');
  t.match(await readUntil(behindBalancer, (s) => s.includes('SSH-2.0-lb')), /upstream-one/, 'with a header it is routed');
  behindBalancer.destroy();
  routedBefore.write('and still');
  t.match(await readUntil(routedBefore, (s) => s.includes('and still')), /and still/, 'established connections are untouched');

  // Trusted networks narrowed to where loopback is not: refused at accept from now on.
  await proxy.reload(parseConfig(tuned(['proxy_protocol: on', 'proxy_protocol_trusted_networks: [10.0.0.0/8]'])).config);
  const untrusted = await tcpClient(port);
  untrusted.on('error', () => {});
  await closedWithin(t, untrusted, 0, 'a connection from an untrusted network');
  t.equal(proxy.stats().multiplex!.failures.GATE_ERR_PROXY_HEADER_REFUSED, 1, 'the new trusted networks apply');

  // A cap of 3 with two connections open from before: the third fits, the fourth is refused.
  await proxy.reload(parseConfig(tuned(['max_connections: 3'])).config);
  const fits = await tcpClient(port);
  fits.write('SSH-2.0-fits\r\n');
  await readUntil(fits, (s) => s.includes('fits'));
  const over = await tcpClient(port);
  over.on('error', () => {});
  await closedWithin(t, over, 0, 'the connection over the cap');
  t.equal(
    proxy.stats().multiplex!.failures.GATE_ERR_TOO_MANY_CONNECTIONS,
    1,
    'the new max_connections counts the connections already open',
  );
  fits.destroy();
  routedBefore.destroy();
  undecidedBefore.destroy();
});
