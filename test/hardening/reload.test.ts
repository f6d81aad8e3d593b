/**
 * Reload under load: 500 TLS connections terminated here stream through a forward while setRoutes
 * replaces the routes and the certificate. None of the 500 may drop (each gets its whole stream
 * back, SHA-256 compared), and connections opened after the swap see the new certificate and the
 * new upstream at once.
 */
import t from 'tap';
import { createHash, X509Certificate } from 'node:crypto';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward, terminate } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import type { Route } from '../../lib/mux/types.js';
import { closeServer, readUntil, startTaggedTcpServer, tlsClient, until } from '../helpers/net.js';
import { prng } from '../helpers/prng.js';

const STREAMS = Number(process.env.GATE_RELOAD_STREAMS ?? 500);
const CHUNKS = 16; // per stream, 2 KiB each; the swap lands after the 8th
const CHUNK = 2048;

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

t.test(`${STREAMS} streaming connections survive a route and certificate swap; new ones follow it`, async (t) => {
  const { ca, server: oldPair } = devCertificates();
  const newPair = ca.issue({ commonName: 'localhost (rotated)', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  const fingerprint = (pem: string): string => new X509Certificate(pem).fingerprint256;

  const oldUp = await startTaggedTcpServer('OLD');
  const newUp = await startTaggedTcpServer('NEW');
  t.teardown(async () => {
    for (const s of [...oldUp.sockets, ...newUp.sockets]) s.destroy();
    await Promise.all([closeServer(oldUp.server), closeServer(newUp.server)]);
  });
  const routesFor = (pair: { cert: string; key: string }, port: number): Route[] => [
    { name: 'stream', match: { sni: 'localhost' }, handler: terminate(pair, forward({ host: '127.0.0.1', port })) },
  ];
  const mux = new Multiplexer({ routes: routesFor(oldPair, oldUp.port) });
  const { port } = await mux.listen({ port: 0, backlog: 1024 });
  t.teardown(() => mux.close({ graceMs: 100 }));

  const rand = prng(0x7e10ad);
  // Each stream sends half its chunks, waits for the swap, sends the rest: all 500 are
  // mid-stream when the routes change, by construction rather than by timing.
  let halfway = 0;
  let swap!: () => void;
  const swapped = new Promise<void>((resolve) => (swap = resolve));
  const results: Array<{ ok: boolean; why: string; cert: string }> = [];

  async function stream(i: number): Promise<void> {
    const socket = await tlsClient(port, { servername: 'localhost' });
    socket.on('error', () => {});
    const cert = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
    const greeting = await readUntil(socket, (s) => s.includes('\n'));
    const payload = rand.bytes(CHUNK * CHUNKS);
    const got: Buffer[] = [];
    socket.on('data', (d: Buffer) => got.push(d));
    socket.resume(); // readUntil left it paused
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    for (let c = 0; c < CHUNKS; c++) {
      if (c === CHUNKS / 2) {
        halfway++;
        await swapped;
      }
      socket.write(payload.subarray(c * CHUNK, (c + 1) * CHUNK));
      await new Promise((r) => setTimeout(r, 5 + ((i + c) % 10)));
    }
    socket.end();
    await ended;
    const echoed = Buffer.concat(got);
    results.push({
      ok: greeting === 'OLD\n' && sha(echoed) === sha(payload),
      why: `#${i} greeting ${JSON.stringify(greeting)} ${echoed.length}/${payload.length}`,
      cert,
    });
  }

  const streams: Array<Promise<void>> = [];
  for (let i = 0; i < STREAMS; i++) {
    streams.push(stream(i));
    if (i % 50 === 49) await new Promise((r) => setTimeout(r, 20)); // open at a bounded rate
  }
  await until(() => halfway === STREAMS, `${STREAMS} streams to be halfway`, 60_000);
  const openAtSwap = mux.openConnections;

  // The swap: new certificate, new upstream, while all 500 are mid-stream.
  mux.setRoutes(routesFor(newPair, newUp.port));
  const fresh = await tlsClient(port, { servername: 'localhost' });
  const freshCert = fresh.getPeerX509Certificate()?.fingerprint256;
  const freshGreeting = await readUntil(fresh, (s) => s.includes('\n'));
  fresh.destroy();
  swap();

  await Promise.all(streams);
  await until(() => mux.openConnections === 0, 'connections to settle', 10_000);

  const bad = results.filter((r) => !r.ok);
  t.equal(results.length, STREAMS);
  t.same(
    bad.slice(0, 5).map((r) => r.why),
    [],
    `every old stream complete and byte-exact (${bad.length} bad)`,
  );
  t.ok(
    results.every((r) => r.cert === fingerprint(oldPair.cert)),
    'old streams kept the old certificate',
  );
  t.equal(openAtSwap, STREAMS, `all ${STREAMS} were open, mid-stream, at the swap`);
  t.equal(freshCert, fingerprint(newPair.cert), 'a connection after the swap gets the new certificate');
  t.equal(freshGreeting, 'NEW\n', 'and the new upstream');
  t.same(mux.stats().failures, {}, 'no connection failed');
  t.equal(mux.stats().byRoute.stream?.connections, STREAMS + 1);
});
