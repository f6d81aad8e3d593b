// Reverse tunnels in one process: agents dial a Multiplexer's tunnel route; clients reach targets
// through them. Postgres, tinyproxy and proxy restarts are in postgres-e2e.test.ts.
import t from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { startAgent, type AgentOptions, type TunnelAgent } from '../../lib/tunnel/agent.js';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { X509Certificate } from 'node:crypto';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { ALPN_REVERSE_TUNNEL_FRAMED } from '../../lib/wire/names.js';
import { captureLogs } from '../hardening/log-capture.js';
import { listening, closeServer, freezableRelay, readUntil, tlsClient, until } from '../helpers/net.js';
import type { Teardownable } from '../helpers/daemon.js';
import { agentCertificate, startProxySide, type ProxySide } from '../helpers/tunnel-rig.js';

const { ca, server } = devCertificates();

/** An upstream that greets with `tag\n` and echoes; counts its open sockets. */
async function taggedEcho(t: Teardownable, tag: string): Promise<{ address: string; sockets: Set<Socket>; server: Server }> {
  const sockets = new Set<Socket>();
  const srv = createServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.write(`${tag}\n`);
    socket.pipe(socket);
  });
  const port = await listening(srv);
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return closeServer(srv);
  });
  return { address: `127.0.0.1:${port}`, sockets, server: srv };
}

function agent(
  t: Teardownable,
  proxy: ProxySide | number,
  name: string,
  resources: string[],
  extra: Partial<AgentOptions> = {},
): TunnelAgent {
  const port = typeof proxy === 'number' ? proxy : proxy.port;
  const a = startAgent({
    proxy: `127.0.0.1:${port}`,
    name,
    ...agentCertificate(name),
    ca: ca.cert,
    serverName: 'localhost',
    resources,
    env: {},
    backoff: { initialMs: 50, maxMs: 400 },
    heartbeatIntervalMs: 1000,
    heartbeatTimeoutMs: 5000,
    ...extra,
  });
  t.teardown(() => a.close());
  return a;
}

async function proxySide(t: Teardownable, ...args: Parameters<typeof startProxySide>): Promise<ProxySide> {
  const side = await startProxySide(...args);
  t.teardown(() => side.close());
  return side;
}

/** Connects with `alpn`, reads the greeting line. */
async function greet(port: number, alpn: string): Promise<{ socket: Awaited<ReturnType<typeof tlsClient>>; line: string }> {
  const socket = await tlsClient(port, { servername: 'localhost', ALPNProtocols: [alpn] });
  const line = (await readUntil(socket, (s) => s.includes('\n'))).trim();
  return { socket, line };
}

/**
 * Waits for a socket to close, reading (and dropping) what it is sent first: a refused client is
 * told why in its protocol before the close. Resolves with the error it was destroyed with, if any.
 */
async function closed(socket: Socket): Promise<Error | undefined> {
  let error: Error | undefined;
  socket.on('error', (err) => (error ??= err));
  socket.resume();
  if (!socket.destroyed) await once(socket, 'close');
  return error;
}

t.test('an agent connects and carries a client to its target, both directions and half-close', async (t) => {
  const echo = await taggedEcho(t, 'alpha');
  const proxy = await proxySide(t, [{ alpn: 'gate-redis', agent: 'agent-a', target: echo.address }]);
  const a = agent(t, proxy, 'agent-a', [echo.address]);
  const event = await a.waitConnected();
  t.same(event, { via: 'direct', connections: 1 });
  t.same(proxy.registry.agents(), ['agent-a']);

  const { socket, line } = await greet(proxy.port, 'gate-redis');
  t.equal(line, 'alpha');
  const payload = Buffer.alloc(300_000, 7); // several DATA frames and window updates
  let received = 0;
  socket.on('data', (d: Buffer) => (received += d.length));
  socket.resume(); // readUntil left it paused
  socket.end(payload); // our FIN travels as the stream's; the echo answers, then ends
  await once(socket, 'end');
  t.equal(received, payload.length, 'every echoed byte came back before the end');
  await until(() => a.openStreams === 0 && echo.sockets.size === 0, 'target socket closed');
  t.equal(proxy.mux.stats().failures[ErrorCodes.AGENT_STREAM_FAILED], undefined);
});

t.test('two agents at once, each reaching its own target; refusals carry their codes', async (t) => {
  const one = await taggedEcho(t, 'one');
  const two = await taggedEcho(t, 'two');
  const proxy = await proxySide(t, [
    { alpn: 'gate-redis', agent: 'agent-one', target: one.address },
    { alpn: 'gate-mongodb', agent: 'agent-two', target: two.address },
    { alpn: 'gate-mysql', agent: 'agent-one', target: two.address }, // not in agent-one's policy
    { alpn: 'gate-proxy-ssh', agent: 'agent-absent', target: one.address },
  ]);
  const a = agent(t, proxy, 'agent-one', [one.address]);
  const b = agent(t, proxy, 'agent-two', [two.address]);
  await Promise.all([a.waitConnected(), b.waitConnected()]);
  t.same(proxy.registry.agents().sort(), ['agent-one', 'agent-two']);

  const [r1, r2] = await Promise.all([greet(proxy.port, 'gate-redis'), greet(proxy.port, 'gate-mongodb')]);
  t.equal(r1.line, 'one');
  t.equal(r2.line, 'two');
  r1.socket.destroy();
  r2.socket.destroy();

  const denied = await tlsClient(proxy.port, { servername: 'localhost', ALPNProtocols: ['gate-mysql'] });
  await closed(denied);
  const absent = await tlsClient(proxy.port, { servername: 'localhost', ALPNProtocols: ['gate-proxy-ssh'] });
  await closed(absent);
  await until(() => Object.keys(proxy.mux.stats().failures).length === 2, 'both refusals recorded');
  const failures = proxy.mux.stats().failures;
  t.equal(failures[ErrorCodes.AGENT_TARGET_DENIED], 1, 'the agent refused a target outside its policy');
  t.equal(failures[ErrorCodes.AGENT_OFFLINE], 1, 'no agent of that name: offline');
  t.equal(two.sockets.size, 0, 'the refused target was never dialled by agent-one');
});

t.test('a killed agent: its streams fail at once with GATE_ERR_AGENT_STREAM_FAILED, the other agent is untouched', async (t) => {
  const one = await taggedEcho(t, 'one');
  const two = await taggedEcho(t, 'two');
  const proxy = await proxySide(t, [
    { alpn: 'gate-redis', agent: 'doomed', target: one.address },
    { alpn: 'gate-mongodb', agent: 'survivor', target: two.address },
  ]);
  const doomed = agent(t, proxy, 'doomed', [one.address]);
  const survivor = agent(t, proxy, 'survivor', [two.address]);
  await Promise.all([doomed.waitConnected(), survivor.waitConnected()]);
  const streams = await Promise.all([greet(proxy.port, 'gate-redis'), greet(proxy.port, 'gate-redis'), greet(proxy.port, 'gate-mongodb')]);
  const gone = once(proxy.registry, 'agent-disconnected');
  await doomed.close(); // the agent's process dies: its TCP connection closes under the session
  t.same((await gone)[0], 'doomed');
  // Both of the dead agent's clients are closed by the proxy, not left waiting for bytes.
  await Promise.all([closed(streams[0]!.socket), closed(streams[1]!.socket)]);
  const total = (): number => Object.values(proxy.mux.stats().failures).reduce((a, b) => a + b, 0);
  await until(() => total() >= 2, 'both failures recorded');
  t.same(proxy.mux.stats().failures, { [ErrorCodes.AGENT_STREAM_FAILED]: 2 }, 'each client closed with the clear code');
  t.equal(one.sockets.size, 0, "the dead agent's target sockets are gone");

  const other = streams[2]!.socket;
  other.write('still here\n');
  t.match(await readUntil(other, (s) => s.includes('still here')), /still here/, 'the other agent still carries its stream');
  other.destroy();
  t.same(proxy.registry.agents(), ['survivor']);

  const after = await tlsClient(proxy.port, { servername: 'localhost', ALPNProtocols: ['gate-redis'] });
  await closed(after);
  await until(() => proxy.mux.stats().failures[ErrorCodes.AGENT_OFFLINE] === 1, 'new clients are refused: agent offline');
});

t.test('identity: the certificate names the agent; a foreign CA is refused with its code, told to the agent', async (t) => {
  const proxy = await proxySide(t, []);
  t.throws(
    () =>
      startAgent({
        proxy: `127.0.0.1:${proxy.port}`,
        name: 'someone-else',
        ...agentCertificate('agent-a'),
        ca: ca.cert,
      }),
    {
      code: ErrorCodes.AGENT_IDENTITY,
    },
  );
  const foreign = CertificateAuthority.create('not the proxy CA').issue({ commonName: 'intruder', usage: 'client' });
  const intruder = agent(t, proxy, 'intruder', [], { cert: foreign.cert, key: foreign.key });
  const [refusal] = (await once(intruder, 'refused')) as [GateError];
  t.equal(refusal.code, ErrorCodes.AGENT_CERT_UNTRUSTED, 'the agent learns why');
  t.match(refusal.message, /not from this proxy's CA/);
  await until(() => proxy.mux.stats().failures[ErrorCodes.AGENT_CERT_UNTRUSTED] !== undefined, 'the refusal is recorded with its code');
  t.equal(intruder.connected, false);
  t.equal(intruder.connections, 0, 'never counted as connected');
  t.same(proxy.registry.agents(), []);
  void server;
});

t.test('expired and revoked certificates are refused with their own codes; a duplicate name leaves the first tunnel alone', async (t) => {
  const echo = await taggedEcho(t, 'first');
  let revokedSerial = '';
  const proxy = await proxySide(t, [{ alpn: 'gate-redis', agent: 'twin', target: echo.address }], {
    registry: { isRevoked: (serial) => serial === revokedSerial },
  });
  const expired = ca.issue({ commonName: 'late', usage: 'client', ttlMs: -60_000 });
  const late = agent(t, proxy, 'late', [], { cert: expired.cert, key: expired.key });
  t.equal(((await once(late, 'refused')) as [GateError])[0].code, ErrorCodes.AGENT_CERT_EXPIRED);

  const revokedPair = ca.issue({ commonName: 'banned', usage: 'client' });
  revokedSerial = new X509Certificate(revokedPair.cert).serialNumber.toLowerCase().replace(/^0+/, '');
  const banned = agent(t, proxy, 'banned', [], { cert: revokedPair.cert, key: revokedPair.key });
  t.equal(((await once(banned, 'refused')) as [GateError])[0].code, ErrorCodes.AGENT_CERT_REVOKED);

  const first = agent(t, proxy, 'twin', [echo.address]);
  await first.waitConnected();
  const held = await greet(proxy.port, 'gate-redis');
  t.equal(held.line, 'first');
  const second = agent(t, proxy, 'twin', [echo.address]);
  t.equal(((await once(second, 'refused')) as [GateError])[0].code, ErrorCodes.AGENT_DUPLICATE, 'the copy is refused');
  await second.close();
  held.socket.write('still mine\n');
  t.match(await readUntil(held.socket, (s) => s.includes('still mine')), /still mine/, 'the first tunnel carries on');
  t.equal(first.connected, true);
  t.equal(first.connections, 1, 'the first agent never dropped');
  held.socket.destroy();
  const failures = proxy.mux.stats().failures;
  t.ok((failures[ErrorCodes.AGENT_CERT_EXPIRED] ?? 0) >= 1, 'each retry of the expired agent is refused');
  t.ok((failures[ErrorCodes.AGENT_CERT_REVOKED] ?? 0) >= 1);
  t.ok((failures[ErrorCodes.AGENT_DUPLICATE] ?? 0) >= 1);
});

t.test('a graceful stop sends GOAWAY: the proxy frees the name at once, and it is not a reset', async (t) => {
  const echo = await taggedEcho(t, 'bye');
  const proxy = await proxySide(t, [{ alpn: 'gate-redis', agent: 'polite', target: echo.address }]);
  const a = agent(t, proxy, 'polite', [echo.address]);
  await a.waitConnected();
  const gone = once(proxy.registry, 'agent-disconnected');
  await a.close({ graceMs: 2000 });
  const [name, reason] = (await gone) as [string, string];
  t.equal(name, 'polite');
  t.match(reason, /agent sent GOAWAY \(NO_ERROR\)/, 'the proxy saw a clean GOAWAY');
  const again = agent(t, proxy, 'polite', [echo.address]);
  await again.waitConnected();
  t.same(proxy.registry.agents(), ['polite'], 'the restarted agent has its name back');
});

t.test('a tunnel connection that ends with a FIN and no GOAWAY frees the agent at once, not at its heartbeat', async (t) => {
  const echo = await taggedEcho(t, 'fin');
  const proxy = await proxySide(t, [{ alpn: 'gate-redis', agent: 'abrupt', target: echo.address }], {
    registry: { heartbeatIntervalMs: 60_000, heartbeatTimeoutMs: 60_000 },
  });
  // A relay that can end the proxy's side alone: the FIN an HTTP proxy sends when it drops a
  // CONNECT tunnel, or the kernel when the agent's process dies, with no frame before it.
  const toProxy = new Set<Socket>();
  const all = new Set<Socket>();
  const relay = createServer((inbound) => {
    const outbound = connect(proxy.port, '127.0.0.1');
    toProxy.add(outbound);
    for (const s of [inbound, outbound]) {
      all.add(s);
      s.on('error', () => {});
      s.once('close', () => all.delete(s));
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  const relayPort = await listening(relay);
  t.teardown(() => {
    for (const s of all) s.destroy();
    return closeServer(relay);
  });
  const a = agent(t, relayPort, 'abrupt', [echo.address], { heartbeatIntervalMs: 60_000, heartbeatTimeoutMs: 60_000 });
  await a.waitConnected();
  const gone = once(proxy.registry, 'agent-disconnected');
  for (const s of toProxy) s.end();
  const [name, reason] = (await gone) as [string, string];
  t.equal(name, 'abrupt');
  t.match(reason, /agent closed the connection/, 'the FIN ended the tunnel (no heartbeat is due for a minute)');
  t.notOk(proxy.registry.has('abrupt'), 'the name is free for a successor');
});

t.test('heartbeats: a path that goes silent (no FIN) is torn down on both sides, and the agent comes back', async (t) => {
  const echo = await taggedEcho(t, 'hb');
  const proxy = await proxySide(t, [{ alpn: 'gate-redis', agent: 'quiet', target: echo.address }], {
    registry: { heartbeatIntervalMs: 200, heartbeatTimeoutMs: 1000 },
  });
  const relay = await freezableRelay(t, proxy.port);
  const a = agent(t, relay.port, 'quiet', [echo.address], { heartbeatIntervalMs: 200, heartbeatTimeoutMs: 1000, stableAfterMs: 60_000 });
  await a.waitConnected();
  const { socket } = await greet(proxy.port, 'gate-redis');
  const proxyNoticed = once(proxy.registry, 'agent-disconnected');
  const agentNoticed = once(a, 'disconnected');
  const back = once(a, 'connected');
  relay.freeze();
  const [name, reason] = (await proxyNoticed) as [string, string];
  t.equal(name, 'quiet');
  t.match(reason, /heartbeat/, 'the proxy says why');
  t.match(((await agentNoticed) as [{ reason: string }])[0].reason, /heartbeat: no PING answer/, 'the agent noticed on its own');
  await closed(socket);
  await until(() => proxy.mux.stats().failures[ErrorCodes.AGENT_STREAM_FAILED] === 1, 'the stream failed with the clear code');
  t.same(((await back) as [{ connections: number }])[0].connections, 2, 'reconnected through a fresh relay connection');
  await proxy.registry.waitFor('quiet');
  const again = await greet(proxy.port, 'gate-redis');
  t.equal(again.line, 'hb');
  again.socket.destroy();
});

t.test(
  'a proxy that completes TLS and then says nothing: the dial is given up at the PING deadline, not held until a heartbeat',
  async (t) => {
    // A stand-in that takes the tunnel ALPN and never speaks the framing: no PING answer.
    const held = new Set<TLSSocket>();
    let accepted = 0;
    const silent = createTlsServer({ ...server, ALPNProtocols: [ALPN_REVERSE_TUNNEL_FRAMED] }, (socket) => {
      accepted++;
      held.add(socket);
      socket.on('error', () => {});
      socket.once('close', () => held.delete(socket));
      socket.resume(); // reads (and drops) the agent's frames, so its FIN is seen
    });
    const port = await listening(silent);
    t.teardown(() => {
      for (const s of held) s.destroy();
      return closeServer(silent);
    });
    const logs = captureLogs();
    // No heartbeat is due for a minute: only the admission deadline can end a silent dial.
    const a = agent(t, port, 'patient', [], { heartbeatIntervalMs: 60_000, heartbeatTimeoutMs: 300, logger: logs.logger });
    // One dial at a time: the third reaching the stand-in means the first two were given up.
    await until(() => accepted >= 3, 'the agent kept dialling', 10_000);
    const failures = logs.lines.filter((l) => l.msg === 'tunnel connection failed');
    t.ok(failures.length >= 2, 'each silent dial failed');
    t.ok(
      failures.every((l) => l.code === ErrorCodes.AGENT_HEARTBEAT_TIMEOUT),
      'with GATE_ERR_AGENT_HEARTBEAT_TIMEOUT',
    );
    t.match(JSON.stringify(failures[0]), /did not admit the tunnel within 300 ms/, 'and says so');
    t.equal(a.connections, 0, 'no tunnel counted');
    await a.close();
    await until(() => held.size === 0, 'every silent connection was closed by the agent');
  },
);

t.test('revocation at reload ends a live tunnel, streams included, and tells the agent', async (t) => {
  const echo = await taggedEcho(t, 'soon-revoked');
  let revoked = '';
  const proxy = await proxySide(t, [{ alpn: 'gate-redis', agent: 'revokee', target: echo.address }], {
    registry: { isRevoked: (s) => s === revoked },
  });
  const a = agent(t, proxy, 'revokee', [echo.address], { backoff: { initialMs: 5000, maxMs: 5000 } });
  await a.waitConnected();
  const { socket, line } = await greet(proxy.port, 'gate-redis');
  t.equal(line, 'soon-revoked');
  t.same(proxy.registry.revalidate(), [], 'nothing revoked yet');
  revoked = new X509Certificate(agentCertificate('revokee').cert).serialNumber.toLowerCase().replace(/^0+/, '');
  const refused = once(a, 'refused');
  t.same(proxy.registry.revalidate(), ['revokee']);
  t.equal(((await refused) as [GateError])[0].code, ErrorCodes.AGENT_CERT_REVOKED, 'the agent learns why');
  await closed(socket);
  t.same(proxy.registry.agents(), []);
});

t.test('a second agent under a held name makes the holder prove it is alive: a dead path frees the name', async (t) => {
  const echo = await taggedEcho(t, 'successor');
  const proxy = await proxySide(t, [{ alpn: 'gate-redis', agent: 'phoenix', target: echo.address }], {
    registry: { heartbeatIntervalMs: 60_000, heartbeatTimeoutMs: 1000 },
  });
  const relay = await freezableRelay(t, proxy.port);
  const old = agent(t, relay.port, 'phoenix', [echo.address], { heartbeatIntervalMs: 60_000, heartbeatTimeoutMs: 60_000 });
  await old.waitConnected();
  relay.freeze(); // the old agent's path dies without a FIN; no heartbeat is due for a minute
  const gone = once(proxy.registry, 'agent-disconnected');
  const successor = agent(t, proxy, 'phoenix', [echo.address]);
  const [, reason] = (await gone) as [string, string];
  t.match(reason, /after a second agent claimed the name/, 'the probe found the old path dead');
  await successor.waitConnected();
  const again = await greet(proxy.port, 'gate-redis');
  t.equal(again.line, 'successor', 'the restarted agent carries the route');
  again.socket.destroy();
  await old.close();
});

t.test("the proxy's GOAWAY: the agent dials a new tunnel at once while open streams finish on the old one", async (t) => {
  const echo = await taggedEcho(t, 'drain');
  const proxy = await proxySide(t, [{ alpn: 'gate-redis', agent: 'drainer', target: echo.address }]);
  const a = agent(t, proxy, 'drainer', [echo.address]);
  await a.waitConnected();
  const before = await greet(proxy.port, 'gate-redis');
  const down = once(a, 'disconnected');
  const up = once(a, 'connected');
  proxy.registry.goAway();
  t.match(((await down) as [{ reason: string }])[0].reason, /proxy sent GOAWAY \(NO_ERROR\)/);
  t.equal(((await up) as [{ connections: number }])[0].connections, 2, 'a new tunnel came up');
  before.socket.write('still flowing\n');
  t.match(
    await readUntil(before.socket, (s) => s.includes('still flowing')),
    /still flowing/,
    'the open stream finished on the old tunnel',
  );
  before.socket.destroy();
  await proxy.registry.waitFor('drainer');
  const after = await greet(proxy.port, 'gate-redis');
  t.equal(after.line, 'drain', 'new clients use the new tunnel');
  after.socket.destroy();
});
