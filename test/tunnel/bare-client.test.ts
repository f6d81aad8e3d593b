// A passthrough client carried by a tunnel stream while still on its bare libuv handle (the
// multiplexer's fast path hands it to viaTunnel's BARE_CLIENT hook, relayed by a FramedRelay):
// the same guarantees as the net.Socket path, checked on both transports. The agent is reduced
// to its framed session so that the test sees its stream as the proxy left it: a FIN or a reset,
// the bytes, backpressure.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { ErrorCodes } from '../../lib/errors.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { tunnelRoute } from '../../lib/tunnel/endpoint.js';
import { TunnelRegistry } from '../../lib/tunnel/registry.js';
import { viaTunnel } from '../../lib/tunnel/via-tunnel.js';
import { handlesAvailable } from '../../lib/transport/uv.js';
import { FramedDuplex } from '../../lib/tunnel-framing/framed-duplex.js';
import type { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import { WireError } from '../../lib/tunnel-framing/frames.js';
import { until } from '../helpers/net.js';
import { handMadeAgent } from '../helpers/hand-made-agent.js';
import { gone, stalled } from '../helpers/relay-checks.js';

const { ca, server } = devCertificates();
const REQUEST = Buffer.from('GET / HTTP/1.1\r\nHost: behind\r\n\r\n');
const MiB = 1 << 20;
const BULK = 24 * MiB;

interface Rig {
  mux: Multiplexer;
  port: number;
  /** The next client stream the agent gets, answered, as a Duplex (its first bytes unread). */
  nextStream: () => Promise<FramedDuplex>;
  session: FramedSession;
}

/** A proxy whose HTTP/1 clients are passed through agent `a`'s tunnel, and that agent, hand-made. */
async function rig(t: Test, fastPath: boolean, idleTimeoutMs = 0): Promise<Rig> {
  const registry = new TunnelRegistry({});
  const mux = new Multiplexer({
    fastPath,
    ...(idleTimeoutMs > 0 ? { idleTimeoutMs } : {}),
    routes: [
      tunnelRoute(registry, { cert: server.cert, key: server.key, ca: ca.cert }),
      { name: 'via-agent', match: { protocol: 'http1' }, handler: viaTunnel(registry, 'a', '127.0.0.1:9') },
    ],
  });
  const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(async () => {
    const closed = mux.close({ graceMs: 0 });
    registry.close();
    await closed;
  });
  const { session, nextConnect } = await handMadeAgent(t, port, registry, 'a');
  const nextStream = async (): Promise<FramedDuplex> => {
    const [stream] = await nextConnect();
    stream.respond({ status: 200, code: '', reason: '' });
    const duplex = new FramedDuplex(stream);
    duplex.on('error', () => {}); // a reset, or the tunnel gone: what each test reads from the stream
    return duplex;
  };
  return { mux, port, session, nextStream };
}

/** A client of the proxy that has sent its request; and the agent's stream for it. */
async function connection(r: Rig): Promise<{ client: Socket; stream: FramedDuplex }> {
  const streamP = r.nextStream();
  const client = connect({ port: r.port, host: '127.0.0.1', allowHalfOpen: true });
  client.on('error', () => {});
  client.write(REQUEST);
  return { client, stream: await streamP };
}

function digest(input: Readable, skip = 0): Promise<string> {
  const hash = createHash('sha256');
  let toSkip = skip;
  input.on('data', (chunk: Buffer) => {
    const n = Math.min(toSkip, chunk.length);
    toSkip -= n;
    hash.update(chunk.subarray(n));
  });
  return once(input, 'end').then(() => hash.digest('hex'));
}

function text(input: Readable): Promise<string> {
  const parts: Buffer[] = [];
  input.on('data', (c: Buffer) => parts.push(c));
  return once(input, 'end').then(() => Buffer.concat(parts).toString());
}

/** Writes `total` bytes of a pattern honouring backpressure, then ends; `sent` counts them. */
function send(out: Writable, total: number): { sent: number; sha: string } {
  const block = Buffer.alloc(64 * 1024);
  for (let i = 0; i < block.length; i += 4) block.writeUInt32BE((i * 2654435761) >>> 0, i);
  const hash = createHash('sha256');
  for (let i = 0; i < total / block.length; i++) hash.update(block);
  const progress = { sent: 0, sha: hash.digest('hex') };
  const pump = (): void => {
    while (progress.sent < total) {
      progress.sent += block.length;
      if (!out.write(block)) return void out.once('drain', pump);
    }
    out.end();
  };
  pump();
  return progress;
}

/** The stream's 'close', or at once when it has closed already. */
function streamClosed({ stream }: FramedDuplex): Promise<unknown> {
  return stream.closed ? Promise.resolve() : new Promise((resolve) => stream.once('close', resolve));
}

/** How the stream closed: NO_ERROR when with a FIN both ways. */
function closeCode({ stream }: FramedDuplex): number {
  return stream.closeCode ?? WireError.NO_ERROR;
}

const transports = handlesAvailable ? [true, false] : [false];
for (const fastPath of transports) {
  t.test(fastPath ? 'on bare handles' : 'on net.Socket', async (t) => {
    t.test('the first bytes go with the OPEN, bulk both ways is exact, and a slow reader on either side stops the sender', async (t) => {
      const r = await rig(t, fastPath);
      const { client, stream } = await connection(r);
      // The agent does not read: the client's sender must stall long before BULK.
      stream.pause();
      const up = send(client, BULK);
      await stalled(up);
      t.ok(up.sent < BULK / 2, `the client stalled after ${up.sent} of ${BULK} bytes`);
      const upSha = digest(stream, REQUEST.length);
      stream.resume();
      t.equal(await upSha, up.sha, 'every byte reached the agent after it read again');
      // The client does not read: the agent's sender must stall.
      client.pause();
      const down = send(stream, BULK);
      await stalled(down);
      t.ok(down.sent < BULK / 2, `the agent stalled after ${down.sent} of ${BULK} bytes`);
      const downSha = digest(client);
      client.resume();
      t.equal(await downSha, down.sha, 'every byte reached the client after it read again');
      await streamClosed(stream);
      t.equal(closeCode(stream), WireError.NO_ERROR, 'the stream closed without a reset');
      await until(() => r.mux.stats().byRoute['via-agent']?.open === 0, 'the connection counted closed');
      const counted = r.mux.stats().byRoute['via-agent']!;
      t.equal(counted.bytesIn, REQUEST.length + BULK, "the client's bytes counted, the request included");
      t.equal(counted.bytesOut, BULK, 'the bytes to the client counted');
      t.same(r.mux.stats().failures, {}, 'no failure');
    });

    t.test("half-close from the client: its FIN is the stream's, the answer still comes back", async (t) => {
      const r = await rig(t, fastPath);
      const { client, stream } = await connection(r);
      const answer = text(client);
      client.end();
      t.equal(await text(stream), REQUEST.toString(), 'the agent read the request, then the FIN');
      stream.end('answer after the FIN');
      t.equal(await answer, 'answer after the FIN', 'the client got the answer, then its FIN');
      await streamClosed(stream);
      t.equal(closeCode(stream), WireError.NO_ERROR, 'no reset');
      await until(() => r.mux.stats().byRoute['via-agent']?.open === 0, 'the connection counted closed');
      t.same(r.mux.stats().failures, {}, 'no failure');
    });

    t.test("half-close from the agent: its FIN is the client's, the client still sends", async (t) => {
      const r = await rig(t, fastPath);
      const { client, stream } = await connection(r);
      const heard = text(stream);
      const told = text(client);
      stream.end('greeting');
      t.equal(await told, 'greeting', 'the client got the bytes, then FIN');
      client.end('late words');
      t.equal(await heard, `${REQUEST}late words`, 'the agent got the late words, then the FIN');
      await streamClosed(stream);
      t.equal(closeCode(stream), WireError.NO_ERROR, 'no reset');
      await until(() => r.mux.stats().byRoute['via-agent']?.open === 0, 'the connection counted closed');
      t.same(r.mux.stats().failures, {}, 'no failure');
    });

    t.test('the agent resets the stream: the client is closed, GATE_ERR_AGENT_STREAM_FAILED', async (t) => {
      const r = await rig(t, fastPath);
      const { client, stream } = await connection(r);
      stream.stream.reset(WireError.CONNECT_ERROR);
      t.ok(await gone(client), 'the client was closed');
      await until(() => r.mux.stats().failures[ErrorCodes.AGENT_STREAM_FAILED] === 1, 'the failure counted with its code');
      t.equal(r.mux.stats().byRoute['via-agent']?.open, 0, 'nothing left open');
    });

    t.test('a client that resets: its stream is released with a FIN, never a reset', async (t) => {
      const r = await rig(t, fastPath);
      const { client, stream } = await connection(r);
      const ended = text(stream);
      client.resetAndDestroy();
      t.equal(await ended, REQUEST.toString(), 'the agent got the FIN');
      stream.end();
      await streamClosed(stream);
      t.equal(closeCode(stream), WireError.NO_ERROR, 'the stream closed without a reset');
      await until(() => r.mux.stats().failures[ErrorCodes.CLIENT_RESET] === 1, 'the client reset counted');
    });

    t.test('an idle connection is closed by the idle timeout and its stream released with a FIN', async (t) => {
      const r = await rig(t, fastPath, 200);
      // The agent's heartbeat, as a real agent's, keeps its own tunnel connection from idling out
      // with the client's: the FIN the proxy queues for the stream must have a tunnel to go on.
      const beat = setInterval(() => r.session.ping(() => {}), 50);
      t.teardown(() => clearInterval(beat));
      const { client, stream } = await connection(r);
      // Read on the stream itself: the Duplex fails when the tunnel goes (see below).
      const parts: Buffer[] = [];
      const ended = new Promise<string>((resolve) => {
        stream.stream.on('data', (c: Buffer) => parts.push(c));
        stream.stream.once('end', () => resolve(Buffer.concat(parts).toString()));
        stream.stream.once('close', () => resolve('closed before its FIN'));
        stream.stream.resume();
      });
      t.ok(await gone(client), 'the client was closed');
      // The FIN arrived before anything else could happen to the stream.
      t.equal(await ended, REQUEST.toString(), 'the agent got the FIN');
      await until(() => r.mux.stats().byRoute['via-agent']?.errors === 1, "the client's connection counted failed");
      t.ok((r.mux.stats().failures[ErrorCodes.IDLE_TIMEOUT] ?? 0) >= 1, 'with GATE_ERR_IDLE_TIMEOUT');
    });
  });
}
