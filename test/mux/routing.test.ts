import t from 'tap';
import { createServer as createHttpServer } from 'node:http';
import { once } from 'node:events';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward, serve, terminate, custom } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { requirePeer } from '../helpers/peers.js';
import { closeServer, readUntil, run, startTaggedTcpServer, startTaggedTlsServer, tcpClient, tlsClient, until } from '../helpers/net.js';
import { tempDir } from '../helpers/temp-dir.js';

// Two TLS upstreams (passthrough: the client's TLS ends at them), an HTTPS web handler served
// in-process, plaintext SSH to a TCP upstream, and a silent route for server-speaks-first clients.
const upA = await startTaggedTlsServer('A');
const upB = await startTaggedTlsServer('B');
const sshUp = await startTaggedTcpServer('SSH-2.0-upstream');
const mysqlUp = await startTaggedTcpServer('MYSQL-GREETING');
const { server: serverPair } = devCertificates();
const web = createHttpServer((req, res) => {
  res.setHeader('content-type', 'text/plain');
  res.end(`web ${req.method} ${req.url} via ${req.socket.constructor.name}\n`);
});

const mux = new Multiplexer({
  routes: [
    { name: 'a', match: { sni: 'a.gate.test' }, handler: forward({ host: '127.0.0.1', port: upA.port }) },
    { name: 'b', match: { alpn: 'gate-bench' }, handler: forward({ host: '127.0.0.1', port: upB.port }) },
    { name: 'wild', match: { sni: '*.wild.test' }, handler: forward({ host: '127.0.0.1', port: upB.port }) },
    {
      name: 'web',
      match: { sni: ['localhost', 'gate.test'] },
      handler: terminate({ ...serverPair, alpnProtocols: ['http/1.1'] }, serve(web)),
    },
    { name: 'web-plain', match: { protocol: 'http1' }, handler: serve(web) },
    { name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: sshUp.port }) },
    { name: 'mysql', match: { protocol: 'silent' }, handler: forward({ host: '127.0.0.1', port: mysqlUp.port }) },
    {
      name: 'info',
      match: { alpn: 'x-info' },
      handler: terminate(
        { ...serverPair, alpnProtocols: ['x-info'] },
        custom((socket, info) => {
          socket.end(
            JSON.stringify({
              protocol: info.protocol,
              sni: info.sni,
              alpn: info.alpn,
              negotiated: info.negotiatedAlpn,
              route: info.route,
              remote: info.remote.address,
            }),
          );
        }),
      ),
    },
  ],
});
const { port } = await mux.listen({ host: '127.0.0.1', port: 0, silentRoute: 'mysql', silentAfterMs: 300 });

t.teardown(async () => {
  await mux.close({ graceMs: 100 });
  await Promise.all([
    closeServer(upA.server),
    closeServer(upB.server),
    closeServer(sshUp.server),
    closeServer(mysqlUp.server),
    closeServer(web),
  ]);
});

t.test('Node tls client: routed by exact SNI to upstream A, TLS passes through', async (t) => {
  const socket = await tlsClient(port, { servername: 'a.gate.test', ALPNProtocols: ['h2'] });
  const line = await readUntil(socket, (s) => s.includes('\n'));
  t.equal(line, 'A sni=a.gate.test alpn=h2\n', 'upstream saw SNI and negotiated ALPN itself');
  socket.write('ping');
  t.match(await readUntil(socket, (s) => s.includes('ping')), /ping/);
  socket.destroy();
});

t.test('routed by ALPN anywhere in the client list when no SNI route matches', async (t) => {
  const socket = await tlsClient(port, {
    servername: 'localhost-unrouted.test',
    ALPNProtocols: ['h2', 'gate-bench'],
    checkServerIdentity: () => undefined,
  });
  t.match(await readUntil(socket, (s) => s.includes('\n')), /^B sni=localhost-unrouted.test alpn=h2/);
  socket.destroy();
});

t.test('SNI is case-insensitive and wildcards match subdomains', async (t) => {
  const socket = await tlsClient(port, { servername: 'Deep.Sub.WILD.test', checkServerIdentity: () => undefined });
  t.match(await readUntil(socket, (s) => s.includes('\n')), /^B /);
  socket.destroy();
});

t.test('an unmatched TLS client gets an unrecognized_name alert, not a reset', async (t) => {
  const err = await tlsClient(port, { servername: 'nobody.test' }).then(
    () => undefined,
    (e: NodeJS.ErrnoException) => e,
  );
  t.ok(err, 'handshake fails');
  t.match(String(err?.code), /UNRECOGNIZED_NAME/);
});

t.test('an unmatched ALPN gets a no_application_protocol alert', async (t) => {
  const err = await tlsClient(port, { servername: 'nobody.test', ALPNProtocols: ['nope'] }).then(
    () => undefined,
    (e: NodeJS.ErrnoException) => e,
  );
  t.match(String(err?.code), /NO_APPLICATION_PROTOCOL/);
});

t.test('terminate + custom handler sees protocol, SNI, offered and negotiated ALPN', async (t) => {
  const socket = await tlsClient(port, { servername: 'info.gate.test', ALPNProtocols: ['x-other', 'x-info'] });
  const info = JSON.parse(await readUntil(socket, (s) => s.endsWith('}')));
  t.same(info, {
    protocol: 'tls',
    sni: 'info.gate.test',
    alpn: ['x-other', 'x-info'],
    negotiated: 'x-info',
    route: 'info',
    remote: '127.0.0.1',
  });
});

t.test('openssl s_client -servername -alpn reaches the right upstream', async (t) => {
  const openssl = requirePeer(t, 'openssl', 'openssl');
  if (!openssl) return;
  for (const [servername, alpn, expected] of [
    ['a.gate.test', 'http/1.1', /A sni=a\.gate\.test alpn=http\/1\.1/],
    ['x.wild.test', 'gate-bench,h2', /B sni=x\.wild\.test alpn=(gate-bench|h2)\n/],
  ] as const) {
    for (const version of ['-tls1_2', '-tls1_3']) {
      const out = await run(
        openssl,
        [
          's_client',
          '-connect',
          `127.0.0.1:${port}`,
          '-servername',
          servername,
          '-alpn',
          alpn,
          version,
          '-quiet',
          '-no_ign_eof',
          '-verify_quiet',
        ],
        { closeStdinWhen: (out) => out.includes('\n') },
      );
      t.match(out.stdout, expected, `${servername} ${alpn} ${version}`);
    }
  }
});

t.test('curl over HTTPS reaches the in-process web handler (TLS terminated here)', async (t) => {
  const curl = requirePeer(t, 'curl', 'curl');
  if (!curl) return;
  const { ca } = devCertificates();
  const { writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const caFile = join(await tempDir(t, 'ca'), 'ca.pem');
  writeFileSync(caFile, ca.cert);
  const out = await run(curl, ['-sS', '--cacert', caFile, '--resolve', `gate.test:${port}:127.0.0.1`, `https://gate.test:${port}/hello`]);
  t.equal(out.code, 0, out.stderr);
  t.equal(out.stdout, 'web GET /hello via TLSSocket\n');
  const plain = await run(curl, ['-sS', `http://127.0.0.1:${port}/plain`]);
  t.equal(plain.stdout, 'web GET /plain via Socket\n', 'plaintext HTTP/1 goes to the plain web route');
});

t.test('an SSH banner is routed to the SSH upstream with the banner replayed', async (t) => {
  const socket = await tcpClient(port);
  socket.write('SSH-2.0-OpenSSH_9.2\r\n');
  const got = await readUntil(socket, (s) => s.includes('OpenSSH_9.2'));
  t.equal(got, 'SSH-2.0-upstream\nSSH-2.0-OpenSSH_9.2\r\n', 'upstream greeted, then echoed the replayed client banner');
  socket.destroy();
});

t.test('a silent client reaches the server-speaks-first route', async (t) => {
  const socket = await tcpClient(port);
  t.equal(await readUntil(socket, (s) => s.includes('\n')), 'MYSQL-GREETING\n');
  socket.write('login');
  t.match(await readUntil(socket, (s) => s.includes('login')), /login/);
  socket.destroy();
});

t.test('half-close: the client FIN reaches the upstream, which still answers', async (t) => {
  const socket = await tcpClient(port);
  socket.end('SSH-2.0-x\r\nlast words');
  let all = '';
  socket.on('data', (d) => (all += d));
  await once(socket, 'end');
  t.equal(all, 'SSH-2.0-upstream\nSSH-2.0-x\r\nlast words', 'echo of everything sent before FIN came back after it');
});

t.test('stats count routes, protocols and failures', async (t) => {
  const stats = mux.stats();
  t.ok(stats.byRoute.a!.connections >= 2);
  t.ok(stats.byRoute.ssh!.bytesIn > 0);
  t.ok(stats.byProtocol.tls! > 0 && stats.byProtocol.ssh! > 0 && stats.byProtocol.silent! > 0);
  t.ok((stats.failures.GATE_ERR_NO_ROUTE ?? 0) >= 2, 'no-route failures counted');
  t.ok(stats.helloBytes.count > 0 && stats.helloBytes.max >= stats.helloBytes.sum / stats.helloBytes.count);
});

t.test('terminated TLS half-closes through to the upstream and every connection is released', async (t) => {
  const mux2 = new Multiplexer({
    routes: [
      {
        name: 'ssh-tls',
        match: { alpn: 'gate-proxy-ssh' },
        handler: terminate(serverPair, forward({ host: '127.0.0.1', port: sshUp.port })),
      },
    ],
  });
  const { port: port2 } = await mux2.listen({ port: 0 });
  const socket = await tlsClient(port2, { servername: 'localhost', ALPNProtocols: ['gate-proxy-ssh'] });
  socket.end('SSH-2.0-then-fin\r\n');
  let got = '';
  socket.on('data', (d) => (got += d));
  await once(socket, 'end');
  t.equal(got, 'SSH-2.0-upstream\nSSH-2.0-then-fin\r\n', 'the echo of bytes sent before our FIN still arrived');
  await until(() => mux2.openConnections === 0, 'the connection to be released');
  t.equal(mux2.stats().byRoute['ssh-tls']!.errors, 0, 'closed cleanly');
  await mux2.close({ graceMs: 50 });
});

t.test('after every client above has gone, no connection is left open', async (t) => {
  await until(() => mux.openConnections === 0, 'connections to be released');
  t.equal(mux.stats().open, 0);
});
