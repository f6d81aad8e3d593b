// TLS passthrough to a Postgres server after an SSLRequest that the multiplexer answered itself:
// `forward` replays the SSLRequest to the upstream and splices only after its one-byte 'S'.
import t from 'tap';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { connect as tlsConnect, TLSSocket } from 'node:tls';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { closeServer, listening, readUntil, tcpClient, until } from '../helpers/net.js';

const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
const { server: pair, ca } = devCertificates();

/** A Postgres stand-in: takes the SSLRequest, answers `answer`, then (after 'S') TLS with an echo. */
async function fakePostgres(answer: string): Promise<{ port: number; requests: Buffer[]; close(): Promise<void> }> {
  const requests: Buffer[] = [];
  const server = createServer((socket: Socket) => {
    socket.on('error', () => {});
    let got = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      got = Buffer.concat([got, chunk]);
      if (got.length < 8) return;
      socket.removeListener('data', onData);
      socket.pause();
      requests.push(got);
      socket.write(answer);
      if (answer !== 'S') return;
      const tls = new TLSSocket(socket, { isServer: true, ...pair });
      tls.on('error', () => {});
      tls.on('secure', () => tls.write('secure hello\n'));
      tls.pipe(tls);
    };
    socket.on('data', onData);
  });
  return { port: await listening(server), requests, close: () => closeServer(server) };
}

async function withMux(upstreamPort: number, fn: (port: number, mux: Multiplexer) => Promise<void>): Promise<void> {
  const mux = new Multiplexer({
    routes: [{ name: 'pg', match: { protocol: 'postgres' }, handler: forward({ host: '127.0.0.1', port: upstreamPort }) }],
  });
  const { port } = await mux.listen({ port: 0 });
  try {
    await fn(port, mux);
  } finally {
    await mux.close({ graceMs: 50 });
  }
}

async function sslRequest(port: number): Promise<Socket> {
  const raw = await tcpClient(port);
  raw.write(SSL_REQUEST);
  const [chunk] = (await once(raw, 'data')) as [Buffer];
  if (chunk.toString('latin1') !== 'S') throw new Error(`multiplexer answered ${chunk.toString('hex')}`);
  raw.pause();
  return raw;
}

t.test("the SSLRequest is replayed; after the upstream's 'S' the client's TLS reaches it untouched", async (t) => {
  const pg = await fakePostgres('S');
  t.teardown(() => pg.close());
  await withMux(pg.port, async (port) => {
    const raw = await sslRequest(port);
    const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: ca.cert });
    await once(tls, 'secureConnect');
    t.equal(await readUntil(tls, (s) => s.endsWith('\n')), 'secure hello\n', 'TLS end to end with the upstream');
    tls.write('ping\n');
    t.equal(await readUntil(tls, (s) => s.endsWith('\n')), 'ping\n', 'echo through the splice');
    t.same(pg.requests, [SSL_REQUEST], 'the upstream got exactly the SSLRequest first');
    tls.destroy();
  });
});

for (const [answer, why] of [
  ['N', 'declined TLS'],
  ['SX', 'unexpected bytes after'],
] as const) {
  t.test(`an upstream answering ${JSON.stringify(answer)} fails the connection (${why})`, async (t) => {
    const pg = await fakePostgres(answer);
    t.teardown(() => pg.close());
    await withMux(pg.port, async (port, mux) => {
      const raw = await sslRequest(port);
      // The route is chosen on the ClientHello that follows; only then is the upstream dialed.
      const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: ca.cert });
      tls.on('error', () => {});
      await new Promise((resolve) => tls.once('close', resolve));
      t.notOk(tls.authorized, 'no TLS session was established');
      await until(() => (mux.stats().failures.GATE_ERR_HANDLER_FAILED ?? 0) === 1, 'the failure to be counted');
      t.equal(mux.stats().failures.GATE_ERR_HANDLER_FAILED, 1);
    });
  });
}
