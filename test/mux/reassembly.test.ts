import t from 'tap';
import { createHash } from 'node:crypto';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom } from '../../lib/handlers/builders.js';
import { loadHelloFixtures } from '../fixtures/hello-fixtures.js';
import { frame, unframe } from '../tls/hello-builder.js';
import { prng } from '../helpers/prng.js';
import { readUntil, tcpClient } from '../helpers/net.js';

// The socket side of reassembly: real captured hellos (Chromium's post-quantum one included)
// arrive in many TCP writes and re-framed into many TLS records; the multiplexer must route them
// by their SNI and hand the handler every byte, unchanged and in order.
const fixtures = loadHelloFixtures().filter((f) => f.expected.sni !== undefined);
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

const mux = new Multiplexer({
  routes: [
    {
      name: 'report',
      match: { protocol: 'tls' },
      handler: custom((socket, info) => {
        const chunks: Buffer[] = [];
        let length = 0;
        socket.on('data', (d: Buffer) => {
          chunks.push(d);
          length += d.length;
          const want = wanted.shift();
          if (want !== undefined && length < want) wanted.unshift(want);
          else socket.end(JSON.stringify({ sni: info.sni, alpn: info.alpn, replayed: sha(Buffer.concat(chunks)) }));
        });
      }),
    },
  ],
});
// The byte count each connection's handler waits for (connections are made one at a time).
const wanted: number[] = [];
const { port } = await mux.listen({ port: 0 });
t.teardown(() => mux.close({ graceMs: 50 }));

async function send(bytes: Buffer, chunkSizes: () => number): Promise<{ sni: string; alpn: string[]; replayed: string }> {
  wanted.push(bytes.length);
  const socket = await tcpClient(port);
  socket.setNoDelay(true);
  for (let offset = 0; offset < bytes.length; ) {
    const n = Math.min(chunkSizes(), bytes.length - offset);
    socket.write(bytes.subarray(offset, offset + n));
    offset += n;
    await new Promise((r) => setImmediate(r)); // let each write leave as its own segment
  }
  const answer = await readUntil(socket, (s) => s.endsWith('}'));
  socket.destroy();
  return JSON.parse(answer);
}

const random = prng(20261121);
for (const fixture of fixtures) {
  t.test(`${fixture.name} (${fixture.bytes.length} bytes)`, async (t) => {
    const whole = await send(fixture.bytes, () => fixture.bytes.length);
    t.same(whole, { sni: fixture.expected.sni, alpn: fixture.expected.alpn, replayed: sha(fixture.bytes) }, 'whole');

    const dribbled = await send(fixture.bytes, () => random.range(1, 40));
    t.same(dribbled, whole, 'in small TCP writes: same route, same bytes replayed');

    // Re-frame the handshake into records of 1..64 bytes (the first ten of 1 byte).
    const message = unframe(fixture.bytes);
    const sizes: number[] = [];
    for (let left = message.length, i = 0; left > 0; i++) {
      const n = Math.min(left, i < 10 ? 1 : random.range(1, 64));
      sizes.push(n);
      left -= n;
    }
    const reframed = frame(message, sizes);
    const split = await send(reframed, () => random.range(1, 200));
    t.same(split, { sni: fixture.expected.sni, alpn: fixture.expected.alpn, replayed: sha(reframed) }, `${sizes.length} records`);
  });
}
