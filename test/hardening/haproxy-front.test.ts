/**
 * A real HAProxy in front of two gate-mux instances (balance roundrobin, send-proxy-v2): each
 * instance must see the real client address and port, through TLS routing by SNI, and refuse a
 * client that bypasses the balancer. Needs: haproxy (Debian package haproxy). Loopback only:
 * clients bind 127.0.0.3 / 127.0.0.4, HAProxy listens on 127.0.0.2 and dials from 127.0.0.1.
 */
import t from 'tap';
import { once } from 'node:events';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, terminate } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import type { ConnectionInfo } from '../../lib/handlers/types.js';
import { requirePeer } from '../helpers/peers.js';
import { freePort } from '../helpers/daemon.js';
import { startHaproxy } from '../helpers/haproxy.js';
import { readUntil, until } from '../helpers/net.js';

t.test('HAProxy send-proxy-v2 in front of two gate-mux instances: each sees the real client', async (t) => {
  const haproxy = requirePeer(t, 'haproxy', 'haproxy');
  if (!haproxy) return;
  const { server: pair, ca } = devCertificates();
  const seen: Array<{ instance: string; info: ConnectionInfo }> = [];
  const instance = (name: string): Multiplexer =>
    new Multiplexer({
      proxyProtocol: { mode: 'on', trusted: ['127.0.0.1/32'] },
      routes: [
        {
          name: 'web',
          match: { sni: 'localhost' },
          handler: terminate(
            pair,
            custom((socket, info) => {
              seen.push({ instance: name, info: { ...info } });
              socket.resume();
              socket.end(`${name} ${info.remote.address}:${info.remote.port}\n`);
            }),
          ),
        },
      ],
    });
  const muxA = instance('a');
  const muxB = instance('b');
  const { port: portA } = await muxA.listen({ host: '127.0.0.1', port: 0 });
  const { port: portB } = await muxB.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => Promise.all([muxA.close({ graceMs: 50 }), muxB.close({ graceMs: 50 })]));

  const front = await freePort('127.0.0.2');
  // startDaemon probes the port with a bare connection; HAProxy relays it, so each instance may
  // see one header-only connection that closes in detection. Counted apart below.
  await startHaproxy(
    t,
    haproxy,
    [
      'listen front',
      `  bind 127.0.0.2:${front}`,
      '  balance roundrobin',
      '  source 127.0.0.1',
      `  server a 127.0.0.1:${portA} send-proxy-v2`,
      `  server b 127.0.0.1:${portB} send-proxy-v2`,
    ],
    { host: '127.0.0.2', port: front },
  );

  const clients: Array<{ local: string; port: number; answer: string }> = [];
  for (let i = 0; i < 6; i++) {
    const localAddress = i % 2 === 0 ? '127.0.0.3' : '127.0.0.4';
    const socket: TLSSocket = tlsConnect({
      socket: netConnect({ host: '127.0.0.2', port: front, localAddress }),
      servername: 'localhost',
      ca: ca.cert,
    });
    await once(socket, 'secureConnect');
    const answer = await readUntil(socket, (s) => s.endsWith('\n'));
    clients.push({ local: localAddress, port: socket.localPort!, answer });
    socket.destroy();
  }
  for (const c of clients)
    t.match(c.answer, new RegExp(`^[ab] ${c.local.replaceAll('.', '\\.')}:${c.port}\\n$`), `instance saw ${c.local}:${c.port}`);
  // HAProxy's round robin alternates, but its readiness probe (and, on a loaded machine, the
  // order it handles them in) can shift a turn: both instances serve, not always three each.
  const served = seen.map((s) => s.instance);
  t.equal(served.length, 6, 'every client served');
  t.same(new Set(served), new Set(['a', 'b']), 'both instances served clients');
  for (const s of seen) {
    t.equal(s.info.proxyHeader?.version, 2);
    t.equal(s.info.local.address, '127.0.0.2', 'local is the balancer front address');
    t.equal(s.info.local.port, front);
  }
  t.equal((muxA.stats().byRoute.web?.connections ?? 0) + (muxB.stats().byRoute.web?.connections ?? 0), 6, 'six routed connections in all');
  t.equal(muxA.stats().byRoute.web?.connections, served.filter((i) => i === 'a').length, 'instance a counted what it served');
  // The only failure allowed is the readiness probe: header, then the balancer's FIN in detection.
  const failures = [muxA.stats().failures, muxB.stats().failures];
  const codes = failures.flatMap((f) => Object.keys(f));
  t.same(
    new Set(codes.filter((c) => c !== 'GATE_ERR_CLIENT_CLOSED')),
    new Set(),
    `no failure from real clients ${JSON.stringify(failures)}`,
  );
  t.ok((failures[0]!.GATE_ERR_CLIENT_CLOSED ?? 0) + (failures[1]!.GATE_ERR_CLIENT_CLOSED ?? 0) <= 1, 'at most the probe closed early');

  // A client that skips the balancer is not trusted to speak at all.
  const bypass = await new Promise<boolean>((resolve) => {
    const s = tlsConnect({
      socket: netConnect({ host: '127.0.0.1', port: portA, localAddress: '127.0.0.3' }),
      servername: 'localhost',
      ca: ca.cert,
    });
    s.once('secureConnect', () => resolve(false));
    s.once('error', () => resolve(true));
  });
  t.ok(bypass, 'a TLS client from 127.0.0.3 straight to an instance gets no handshake');
  await until(() => (muxA.stats().failures.GATE_ERR_PROXY_HEADER_REFUSED ?? 0) >= 1, 'the refusal to be counted');
  t.equal(muxA.stats().failures.GATE_ERR_PROXY_HEADER_REFUSED, 1, 'refused at accept: untrusted source');
});
