import t from 'tap';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { createServer, type Socket } from 'node:net';
import { parseConfig } from '../../lib/config/load.js';
import { GateProxy } from '../../lib/proxy/gate-proxy.js';
import { frameHeader } from '../../lib/framing/ping-frames.js';
import { closeServer, listening, readUntil, startTaggedTcpServer, startTaggedTlsServer, tcpClient } from '../helpers/net.js';

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
const dataDir = mkdtempSync(join(tmpdir(), 'gate-proxy-test-'));
t.teardown(async () => {
  await Promise.all([closeServer(ssh.server), closeServer(ssh2.server), closeServer(mysql.server), closeServer(kube.server), postgres.close(), redis.close()]);
});

function yaml(mode: 'multiplex' | 'separate', sshPort = ssh.port): string {
  const own = mode === 'separate' ? ['  listen_addr: 127.0.0.1:0', '  mysql_listen_addr: 127.0.0.1:0', '  postgres_listen_addr: 127.0.0.1:0', '  tunnel_listen_addr: 127.0.0.1:0', '  kube_listen_addr: 127.0.0.1:0', '  redis_listen_addr: 127.0.0.1:0', '  mongo_listen_addr: 127.0.0.1:0'] : [];
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
  const [listener] = proxy.plan.listeners;
  const port = listener!.port;
  t.equal(proxy.plan.listeners.length, 1, 'one listener');
  const ca = readFileSync(proxy.caFile!, 'utf8');

  const ping = await get(port, '/webapi/ping', ca);
  t.equal(ping.status, 200);
  const body = JSON.parse(ping.body);
  t.equal(body.proxy.tls_routing_enabled, true);
  t.equal(body.proxy.ssh.listen_addr, `127.0.0.1:${port}`, 'with TLS routing every listen address is the web address');
  t.equal(body.proxy.db.postgres_listen_addr, `127.0.0.1:${port}`);
  t.equal(body.proxy.ssh.public_addr, 'gate.example.com:443', 'the first public address');
  t.equal(body.server_version, '0.1.0');

  t.same(await get(port, '/v1/webapi/automaticupgrades/channel/default/version', ca), { status: 200, body: 'v0.1.0', type: 'text/plain; charset=utf-8' });
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
  redisPing.write(Buffer.concat([frameHeader(0), frameHeader(4), Buffer.from('PING')]));
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
  t.match(await readUntil(kubeSocket, (s) => s.includes('\n')), /^KUBE sni=kube-gate-proxy-alpn\.cluster\.test/, 'kube TLS passed through to the upstream');
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
  const byName = Object.fromEntries(proxy.plan.listeners.map((l) => [l.name, l.port]));
  t.ok(byName.web && byName.ssh && byName.mysql && byName.postgres, 'web, ssh, mysql and postgres ports');
  const ca = readFileSync(proxy.caFile!, 'utf8');
  const body = JSON.parse((await get(byName.web!, '/webapi/ping', ca)).body);
  t.equal(body.proxy.tls_routing_enabled, false);
  t.equal(body.proxy.ssh.listen_addr, `127.0.0.1:${byName.ssh}`);
  t.equal(body.proxy.db.mysql_listen_addr, `127.0.0.1:${byName.mysql}`);

  const mysqlClient = await tcpClient(byName.mysql!);
  t.equal(await readUntil(mysqlClient, (s) => s.includes('\n')), 'MYSQL-HANDSHAKE\n', 'server greeting arrives though the client said nothing');
  mysqlClient.destroy();

  const sshClient = await tcpClient(byName.ssh!);
  sshClient.write('SSH-2.0-own-port\r\n');
  t.match(await readUntil(sshClient, (s) => s.includes('own-port')), /^SSH-2.0-upstream-one\n/);
  sshClient.destroy();
});

t.test('reload: established connections keep their upstream, new ones follow the new routes', async (t) => {
  const proxy = await GateProxy.start({ config: parseConfig(yaml('multiplex')).config, version: '0.1.0' });
  t.teardown(() => proxy.close({ graceMs: 100 }));
  const port = proxy.plan.listeners[0]!.port;
  const before = await tcpClient(port);
  before.write('SSH-2.0-before\r\n');
  t.match(await readUntil(before, (s) => s.includes('before')), /upstream-one/);

  await proxy.reload(parseConfig(yaml('multiplex', ssh2.port)).config);
  t.equal(proxy.plan.listeners[0]!.port, port, 'same listener, same port');

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
  const port = proxy.plan.listeners[0]!.port;
  const broken = parseConfig(yaml('multiplex').replace('https_keypairs', 'x') + '  https_keypairs:\n    - cert_file: /nonexistent/cert.pem\n      key_file: /nonexistent/key.pem\n').config;
  await t.rejects(proxy.reload(broken), { code: 'GATE_ERR_CONFIG_INVALID' });
  const client = await tcpClient(port);
  client.write('SSH-2.0-x\r\n');
  t.match(await readUntil(client, (s) => s.includes('SSH-2.0-x')), /upstream-one/, 'still routing with the old configuration');
  client.destroy();
});
