// The "plain Node" peer: what a few lines of net + pipe do without gate-mux. It takes the first
// chunk as the whole ClientHello (one record, one segment: the shortcut HAProxy and sslh take),
// reads SNI and ALPN with a naive walk, dials the upstream, writes the chunk and pipes both ways.
// Same environment and routing rule as router.ts, so the bench can run it as a peer.
import { connect, createServer } from 'node:net';

const listenPort = Number(process.env.LISTEN_PORT);
const portA = Number(process.env.UPSTREAM_A_PORT);
const portB = Number(process.env.UPSTREAM_B_PORT);

/** SNI and ALPN of a ClientHello in `b`; throws RangeError on truncated input. */
function naiveHello(b: Buffer): { sni: string; alpn: string[] } {
  let p = 5 + 4 + 2 + 32; // record header, handshake header, version, random
  p += 1 + b.readUInt8(p); // session id
  p += 2 + b.readUInt16BE(p); // cipher suites
  p += 1 + b.readUInt8(p); // compression methods
  const end = p + 2 + b.readUInt16BE(p);
  p += 2;
  let sni = '';
  const alpn: string[] = [];
  while (p + 4 <= end) {
    const type = b.readUInt16BE(p);
    const len = b.readUInt16BE(p + 2);
    const body = p + 4;
    if (type === 0) sni = b.toString('latin1', body + 5, body + 5 + b.readUInt16BE(body + 3)).toLowerCase();
    if (type === 16) {
      for (let q = body + 2; q < body + len; q += 1 + b.readUInt8(q)) alpn.push(b.toString('latin1', q + 1, q + 1 + b.readUInt8(q)));
    }
    p = body + len;
  }
  return { sni, alpn };
}

const server = createServer((client) => {
  client.on('error', () => client.destroy());
  client.once('data', (hello: Buffer) => {
    client.pause();
    let port = portB;
    try {
      const { sni, alpn } = naiveHello(hello);
      if (sni === 'bench.local' && alpn.includes('gate-bench')) port = portA;
    } catch {
      // not a hello we can read: the default upstream
    }
    const upstream = connect({ host: '127.0.0.1', port }, () => {
      upstream.write(hello);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    upstream.on('error', () => client.destroy());
    // Only a failed upstream takes the client down at once: after a clean end, pipe() ends the
    // client once its queued bytes are written (destroying it here lost the tail of a transfer).
    upstream.on('close', (hadError) => {
      if (hadError) client.destroy();
    });
    client.on('close', () => upstream.destroy());
  });
});
server.listen({ host: '127.0.0.1', port: listenPort, backlog: 4096 });
process.on('SIGTERM', () => process.exit(0));
