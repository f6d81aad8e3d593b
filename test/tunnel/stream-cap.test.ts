// Anonymous clients cannot cut an agent's tunnel (issue 37): the proxy opens at most its cap of
// client streams through one tunnel, a few below the agent's limit, and refuses the surplus client
// at once with GATE_ERR_AGENT_BUSY; and the streams it lets go (clients that left, against a
// target that ignores the FIN) never spend the agent's rapid-reset budget. A real proxy (the
// multiplexer, the registry, TLS-terminating routes), a real agent and real targets on loopback;
// the agent's limit is made small (20, and with it its reset burst) so that a hundred clients are
// five times it (its reset budget follows). Before this change both cases ended the tunnel with ENHANCE_YOUR_CALM.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { ErrorCodes } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startAgent, type TunnelAgent } from '../../lib/tunnel/agent.js';
import { clientStreamCap } from '../../lib/tunnel/settings.js';
import { closeServer, echoOnce, listening, readUntil, tlsClient, until } from '../helpers/net.js';
import { agentCertificate, type ProxySide, startProxySide } from '../helpers/tunnel-rig.js';

/** The agent's limit of concurrent streams (told to the proxy in its HELLO), and the proxy's cap below it. */
const LIMIT = 20;
const CAP = clientStreamCap(LIMIT);
const CLIENTS = 100;

/**
 * A target that greets (`hi\n`) then echoes. `deaf`: it has more to say after its greeting than
 * the client waits for (so a client that leaves is noticed by the proxy's failed write), and it
 * ignores the client's FIN and never ends its own side, as a server that only closes on its own
 * timeout does.
 */
async function target(t: Test, deaf = false): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: deaf }, (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.write('hi\n');
    if (!deaf) return void s.pipe(s);
    s.write(Buffer.alloc(256 * 1024, 0x2e));
    s.on('data', () => {});
  });
  const port = await listening(server);
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return closeServer(server);
  });
  return `127.0.0.1:${port}`;
}

async function rig(t: Test, deaf: boolean): Promise<{ proxy: ProxySide; agent: TunnelAgent }> {
  const [main, other] = [await target(t, deaf), await target(t)];
  const proxy = await startProxySide([
    { alpn: 'gate-redis', agent: 'edge', target: main },
    { alpn: 'gate-mongodb', agent: 'edge', target: other },
  ]);
  t.teardown(() => proxy.close());
  const agent = startAgent({
    proxy: `127.0.0.1:${proxy.port}`,
    name: 'edge',
    ...agentCertificate('edge'),
    ca: devCertificates().ca.cert,
    serverName: 'localhost',
    env: {},
    resources: [main, other],
    maxStreams: LIMIT,
  });
  t.teardown(() => agent.close());
  await agent.waitConnected();
  return { proxy, agent };
}

/** A client of route `alpn` that has read the target's greeting. */
async function greeted(port: number, alpn: string): Promise<TLSSocket> {
  const client = await tlsClient(port, { servername: 'localhost', ALPNProtocols: [alpn] });
  client.on('error', () => {});
  await readUntil(client, (s) => s.includes('hi\n'));
  return client;
}

/** A client of the deaf route, greeted, with its TCP socket (to leave with a reset). */
async function greetedRaw(port: number): Promise<{ client: TLSSocket; raw: Socket }> {
  const raw = connect(port, '127.0.0.1');
  raw.on('error', () => {});
  const client = tlsConnect({ socket: raw, servername: 'localhost', ca: devCertificates().ca.cert, ALPNProtocols: ['gate-redis'] });
  client.on('error', () => {});
  await readUntil(client, (s) => s.includes('hi\n'));
  return { client, raw };
}

/**
 * Connects and sends a Redis command; resolves with the client once greeted by the target, or with
 * what the proxy answered instead (the route's refusal, in Redis's words) before it closed.
 */
async function attempt(port: number, held: Set<Socket>): Promise<TLSSocket | string> {
  const raw = connect(port, '127.0.0.1');
  raw.on('error', () => {});
  held.add(raw);
  const client = tlsConnect({ socket: raw, servername: 'localhost', ca: devCertificates().ca.cert, ALPNProtocols: ['gate-redis'] });
  client.on('error', () => {});
  client.write('PING\r\n');
  let text = '';
  const first = await new Promise<'greeted' | 'closed'>((resolve) => {
    client.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('hi\n')) resolve('greeted');
    });
    raw.once('close', () => resolve('closed'));
  });
  return first === 'greeted' ? client : text;
}

t.test(
  `${CLIENTS} clients holding on through an agent that takes ${LIMIT} streams: the surplus is refused busy, the tunnel stays up`,
  async (t) => {
    const { proxy, agent } = await rig(t, false);
    t.equal(proxy.registry.streamCap('edge'), CAP, "the cap is below the limit the agent's HELLO gave");
    t.ok(CAP < LIMIT);
    const established = await greeted(proxy.port, 'gate-redis');
    const unrelated = await greeted(proxy.port, 'gate-mongodb');
    t.teardown(() => {
      established.destroy();
      unrelated.destroy();
    });

    const held = new Set<Socket>();
    t.teardown(() => {
      for (const s of held) s.destroy();
    });
    const outcomes = await Promise.all(Array.from({ length: CLIENTS }, () => attempt(proxy.port, held)));
    const through = outcomes.filter((c) => typeof c !== 'string').length;
    t.equal(through, CAP - 2, 'as many got through as the cap leaves beside the two established clients');
    const told = outcomes.filter((c) => typeof c === 'string' && /^-ERR gate: .*\(GATE_ERR_AGENT_BUSY\)\r\n$/.test(c)).length;
    t.equal(told, CLIENTS - through, 'every other client read why in its own protocol (-ERR gate: … GATE_ERR_AGENT_BUSY)');
    // A refused connection is counted as its handler ends, which may be just after its client saw the close.
    await until(() => (proxy.mux.stats().failures[ErrorCodes.AGENT_BUSY] ?? 0) >= CLIENTS - through, 'the refusals counted', 5_000).catch(
      () => {},
    );
    const failures = proxy.mux.stats().failures;
    t.equal(
      failures[ErrorCodes.AGENT_BUSY],
      CLIENTS - through,
      `every other client was refused with GATE_ERR_AGENT_BUSY (${JSON.stringify(failures)})`,
    );
    t.equal(proxy.registry.streamStats.busy, CLIENTS - through, 'and no stream was opened for them');
    t.equal(proxy.registry.streamStats.reset, 0, 'the agent refused no open: the proxy kept under its limit');
    t.equal(failures[ErrorCodes.AGENT_OFFLINE], undefined, 'the agent never went away');
    t.equal(failures[ErrorCodes.AGENT_STREAM_FAILED], undefined, 'no stream through it failed');

    t.equal(await echoOnce(established, 'still here'), 'still here', 'the established client is carried on');
    t.equal(await echoOnce(unrelated, 'me too'), 'me too', 'and the unrelated one');
    t.equal(agent.connections, 1, 'the tunnel never dropped');
    t.same(proxy.registry.agents(), ['edge']);

    // The holders leave: their slots come back, and a new client goes through.
    for (const s of held) s.destroy();
    await until(async () => (await attempt(proxy.port, held)) !== undefined, 'a new client gets through once the holders left', 15_000);
  },
);

t.test('early leavers against a target that ignores their FIN: released, reset only after the answer, the tunnel stays up', async (t) => {
  const { proxy, agent } = await rig(t, true);
  const unrelated = await greeted(proxy.port, 'gate-mongodb');
  t.teardown(() => unrelated.destroy());
  // Three waves of as many as the cap leaves, each stream reset by the proxy after its release
  // grace since the target never ends its side: 45 resets in about 16 s, past the agent's reset
  // budget (a burst of its limit, 20, back at 20/30 a second) had they been counted.
  const wave = CAP - 1;
  const rounds = 3;
  for (let round = 1; round <= rounds; round++) {
    const clients = await Promise.all(Array.from({ length: wave }, () => greetedRaw(proxy.port)));
    // Leave as probes do, with bytes still in flight toward them: half with a FIN, half with a TCP reset.
    for (const [i, { client, raw }] of clients.entries()) {
      if (i % 2 === 0) client.destroy();
      else raw.resetAndDestroy();
    }
    await Promise.all(clients.map(({ raw }) => (raw.closed ? undefined : once(raw, 'close'))));
    await until(() => proxy.registry.streamStats.reset >= round * wave, `wave ${round}: every stream let go`, 15_000);
  }
  t.equal(proxy.registry.streamStats.reset, rounds * wave, 'each stream was reset in the end (its target never closed)');
  const failures = proxy.mux.stats().failures;
  t.equal(failures[ErrorCodes.AGENT_OFFLINE], undefined, 'the agent never went away (no ENHANCE_YOUR_CALM)');
  t.equal(failures[ErrorCodes.AGENT_STREAM_FAILED], undefined, 'no stream of another client failed');
  t.equal(agent.connections, 1, 'the tunnel never dropped');
  t.equal(await echoOnce(unrelated, 'unharmed'), 'unharmed', 'the unrelated client is carried on');
  const late = await greetedRaw(proxy.port);
  t.pass('a new client goes through');
  late.raw.destroy();
});

t.test(
  "an agent that takes a single stream: the describe stream fills it, and a client is refused busy by the session's own check",
  async (t) => {
    // The cap leaves nothing below a limit of 1 (it is at least 1), so the proxy's own count lets the
    // client's open through to the session, which knows from the agent's HELLO that the describe
    // stream holds the one slot: it fails the open with GATE_ERR_AGENT_BUSY and sends nothing.
    const main = await target(t);
    const proxy = await startProxySide([{ alpn: 'gate-redis', agent: 'edge', target: main }]);
    t.teardown(() => proxy.close());
    const agent = startAgent({
      proxy: `127.0.0.1:${proxy.port}`,
      name: 'edge',
      ...agentCertificate('edge'),
      ca: devCertificates().ca.cert,
      serverName: 'localhost',
      env: {},
      resources: [main],
      maxStreams: 1,
    });
    t.teardown(() => agent.close());
    await agent.waitConnected();
    t.equal(proxy.registry.streamCap('edge'), 1);
    const held = new Set<Socket>();
    t.teardown(() => {
      for (const s of held) s.destroy();
    });
    const outcome = await attempt(proxy.port, held);
    t.match(outcome, /^-ERR gate: .*\(GATE_ERR_AGENT_BUSY\)\r\n$/, 'the client read why in its own protocol');
    t.equal(proxy.registry.streamStats.busy, 1, 'counted once, as busy');
    t.equal(proxy.registry.streamStats.opened, 0, 'no stream was opened');
    t.equal(proxy.registry.streamStats.reset, 0, 'and none refused by the agent');
    t.equal(agent.connections, 1, 'the tunnel stays up');
  },
);
