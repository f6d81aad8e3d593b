// Clients that leave early must not hurt anyone else on the tunnel: a few hundred
// clients that read a server-first greeting and close, while long transfers run on the same
// tunnel. The proxy releases each departed client's stream with a FIN, not a reset, so the
// agent's session never sees a run of resets (its rapid-reset budget, framed-session.ts, answers
// those with ENHANCE_YOUR_CALM and GOAWAY).
import t from 'tap';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { ErrorCodes } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { closeServer, listening, tlsClient, until } from '../helpers/net.js';
import { agentCertificate, startProxySide } from '../helpers/tunnel-rig.js';

// Past the agent's reset burst (1,000 resets, then 33 a second): with resets, the agent's session
// would answer the run with GOAWAY and the tunnel would be gone for everyone.
const SHORT_CLIENTS = 1200;
const PARALLEL = 20;
const BULK_CLIENTS = 3;
const BULK_BYTES = 24 << 20;

/** A deterministic payload, so each bulk client can check every byte by hash. */
const payload = Buffer.alloc(BULK_BYTES);
for (let i = 0; i < payload.length; i += 4) payload.writeUInt32BE(i, i);
const payloadHash = createHash('sha256').update(payload).digest('hex');

t.test('1,200 early-closing clients beside long transfers: no reset, no failure, bytes exact', async (t) => {
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => {});
  };
  // Server speaks first (as SSH and MySQL do) and has more to say than the client waits for, so
  // the client leaves with bytes still in flight toward it; the server closes on EOF.
  const greeter = createServer((s) => {
    track(s);
    s.write('hello\n');
    s.write(Buffer.alloc(256 * 1024, 0x2e));
  });
  const bulk = createServer((s) => {
    track(s);
    s.end(payload);
  });
  const greeterAddress = `127.0.0.1:${await listening(greeter)}`;
  const bulkAddress = `127.0.0.1:${await listening(bulk)}`;
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await Promise.all([closeServer(greeter), closeServer(bulk)]);
  });
  const proxy = await startProxySide([
    { alpn: 'gate-redis', agent: 'busy', target: greeterAddress },
    { alpn: 'gate-mongodb', agent: 'busy', target: bulkAddress },
  ]);
  t.teardown(() => proxy.close());
  const agent = startAgent({
    proxy: `127.0.0.1:${proxy.port}`,
    name: 'busy',
    ...agentCertificate('busy'),
    ca: devCertificates().ca.cert,
    serverName: 'localhost',
    env: {},
    resources: [greeterAddress, bulkAddress],
  });
  t.teardown(() => agent.close());
  await agent.waitConnected();

  const transfers = Array.from({ length: BULK_CLIENTS }, async () => {
    const client = await tlsClient(proxy.port, { servername: 'localhost', ALPNProtocols: ['gate-mongodb'] });
    const hash = createHash('sha256');
    let bytes = 0;
    client.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
    });
    client.on('error', () => {});
    client.resume();
    await once(client, 'close');
    return { bytes, hash: hash.digest('hex') };
  });

  let greeted = 0;
  const shortClient = async (index: number): Promise<void> => {
    const raw = connect(proxy.port, '127.0.0.1');
    raw.on('error', () => {});
    const client = tlsConnect({ socket: raw, servername: 'localhost', ca: devCertificates().ca.cert, ALPNProtocols: ['gate-redis'] });
    client.on('error', () => {});
    // A client the proxy refuses is closed without data: wait for either, never hang.
    const first = await new Promise<'data' | 'close'>((resolve) => {
      client.once('data', () => resolve('data'));
      raw.once('close', () => resolve('close'));
    });
    if (first === 'close') return;
    greeted++;
    // Leaves without a word, as a probe does: half with a FIN, half with a TCP reset.
    if (index % 2 === 0) client.destroy();
    else raw.resetAndDestroy();
    if (!raw.destroyed) await once(raw, 'close');
  };
  for (let done = 0; done < SHORT_CLIENTS; done += PARALLEL) {
    await Promise.all(Array.from({ length: PARALLEL }, (_, i) => shortClient(done + i)));
  }
  const results = await Promise.all(transfers);

  t.equal(greeted, SHORT_CLIENTS, 'every short client got its greeting');
  for (const [i, r] of results.entries()) {
    t.equal(r.bytes, BULK_BYTES, `transfer ${i}: every byte`);
    t.equal(r.hash, payloadHash, `transfer ${i}: the bytes exact`);
  }
  const failures = proxy.mux.stats().failures;
  t.equal(failures[ErrorCodes.AGENT_OFFLINE], undefined, 'the agent never went away (no GOAWAY from its rapid-reset defence)');
  t.equal(failures[ErrorCodes.AGENT_STREAM_FAILED], undefined, 'no stream of another client failed');
  t.equal(agent.streamsServed, SHORT_CLIENTS + BULK_CLIENTS, 'every client had its stream');
  await until(() => agent.openStreams === 0, 'every target socket closed', 15_000);
  t.equal(proxy.registry.streamStats.reset, 0, 'no stream was reset: each departed client was released with a FIN');
  t.equal(agent.connections, 1, 'the tunnel never dropped');
  t.same(proxy.registry.agents(), ['busy']);
});
