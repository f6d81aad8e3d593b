import t from 'tap';
import { once } from 'node:events';
import { connect as tlsConnect } from 'node:tls';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, terminate } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { readUntil, tcpClient } from '../helpers/net.js';

const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
const GSSENC_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30]);
const { server: pair, ca } = devCertificates();

const report = custom((socket, info) => {
  socket.end(JSON.stringify({ protocol: info.protocol, ssl: info.postgresSslRequest, sni: info.sni ?? null, route: info.route }));
});
const mux = new Multiplexer({
  routes: [
    { name: 'pg', match: { protocol: 'postgres' }, handler: terminate(pair, report) },
    { name: 'web', match: { protocol: 'tls' }, handler: terminate(pair, report) },
  ],
});
const { port } = await mux.listen({ port: 0 });
t.teardown(() => mux.close({ graceMs: 50 }));

async function readByte(socket: NodeJS.ReadableStream): Promise<string> {
  const [chunk] = (await once(socket, 'data')) as [Buffer];
  return chunk.toString('latin1');
}

t.test('SSLRequest is answered S and the TLS that follows is routed as postgres', async (t) => {
  const raw = await tcpClient(port);
  raw.write(SSL_REQUEST);
  t.equal(await readByte(raw), 'S');
  raw.pause();
  const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: ca.cert });
  await once(tls, 'secureConnect');
  t.same(JSON.parse(await readUntil(tls, (s) => s.endsWith('}'))), { protocol: 'postgres', ssl: true, sni: 'localhost', route: 'pg' });
});

t.test('GSSENCRequest is answered N, then the SSLRequest path continues', async (t) => {
  const raw = await tcpClient(port);
  raw.write(GSSENC_REQUEST);
  t.equal(await readByte(raw), 'N');
  raw.write(SSL_REQUEST);
  t.equal(await readByte(raw), 'S');
  raw.pause();
  const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: ca.cert });
  await once(tls, 'secureConnect');
  t.match(JSON.parse(await readUntil(tls, (s) => s.endsWith('}'))), { protocol: 'postgres', ssl: true });
});

t.test('bytes pipelined behind an SSLRequest are refused (no injection before TLS)', async (t) => {
  const raw = await tcpClient(port);
  raw.write(Buffer.concat([SSL_REQUEST, Buffer.from([0x16, 0x03, 0x01])]));
  const chunks: Buffer[] = [];
  raw.on('data', (d: Buffer) => chunks.push(d));
  await once(raw, 'close');
  t.equal(Buffer.concat(chunks).length, 0, 'no S answer');
});

t.test('plain TLS without SSLRequest is protocol tls', async (t) => {
  const tls = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', ca: ca.cert });
  await once(tls, 'secureConnect');
  t.same(JSON.parse(await readUntil(tls, (s) => s.endsWith('}'))), { protocol: 'tls', ssl: false, sni: 'localhost', route: 'web' });
});
