// Proxy peering, in one process: two GateProxy instances started together
// on one data_dir (so one cluster CA), each with its peer listener; a real agent holds its tunnel to
// B; A forwards through B's peering server. The peer port refuses agent, client and foreign
// certificates; the peer client refuses a server that is not a proxy of the cluster.
import t from 'tap';
import { once } from 'node:events';
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { PeerPool } from '../../lib/cluster/peer-pool.js';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import type { KeyPair } from '../../lib/pki/certificate-authority.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { readRefusalDebugData } from '../../lib/tunnel/admission.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import type { GoAwayPayload } from '../../lib/tunnel-framing/frames.js';
import { ALPN_PEER_FRAMED, PEER_ROLE_URI } from '../../lib/wire/names.js';
import { captureLogs } from '../hardening/log-capture.js';
import { clusterAuthority } from '../helpers/cluster.js';
import { startEchoServer } from '../helpers/echo-servers.js';
import { startGateProxy, type RunningGateProxy } from '../helpers/gate-proxy.js';
import { closeServer, echoOnce, listening, until } from '../helpers/net.js';
import { tempDir } from '../helpers/temp-dir.js';
import { type TunnelStream, tunnelDuplex } from '../../lib/tunnel/tunnel-stream.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

/**
 * A forwarded stream as a Duplex. A stream still open when the proxies stop at teardown is reset
 * with them, which a Duplex reports as an 'error': expected here, not a failure of the test.
 */
function duplexOf(stream: TunnelStream): ReturnType<typeof tunnelDuplex> {
  const duplex = tunnelDuplex(stream);
  duplex.on('error', () => {});
  return duplex;
}

/** What the peer port answers a TLS client showing `pair`: the refusal in its GOAWAY, or 'admitted'. */
async function peerPortAnswer(port: number, ca: string, pair: KeyPair | undefined): Promise<string> {
  const socket: TLSSocket = tlsConnect({
    host: '127.0.0.1',
    port,
    ca,
    ALPNProtocols: [ALPN_PEER_FRAMED],
    rejectUnauthorized: false,
    ...(pair ?? {}),
  });
  await once(socket, 'secureConnect');
  const session = new FramedSession(socket, { side: 'dialer' });
  const answer = await new Promise<string>((resolve) => {
    session.once('goaway', (goAway: GoAwayPayload) => {
      const refusal = readRefusalDebugData(Buffer.from(goAway.reason, 'latin1'));
      resolve(refusal ? `${refusal.code} ${refusal.message}` : 'goaway without a code');
    });
    session.ping(() => setTimeout(() => resolve('admitted'), 100));
  });
  session.destroy();
  return answer;
}

t.test('two proxies on one data_dir: one CA, mutual TLS peering, forwarded dials through the holder', async (t) => {
  const dataDir = await tempDir(t, 'cluster-data');
  const start = (logger?: ReturnType<typeof captureLogs>['logger']): Promise<RunningGateProxy> =>
    startGateProxy(t, {
      mode: 'multiplex',
      upstreams: {},
      dataDir,
      proxyService: { peer_listen_addr: '127.0.0.1:0' },
      ...(logger ? { logger } : {}),
    });
  // Started together: the first start of a shared data_dir makes the CA exactly once.
  const [a, b] = await Promise.all([start(), start()]);
  t.equal(a.proxy.caPin, b.proxy.caPin, 'both proxies hold the same cluster CA');
  const ca = await clusterAuthority(dataDir);
  t.equal(ca.cert, a.ca, 'and it is the one on disk');

  const echo = await startEchoServer(t);
  const agentLogs = captureLogs();
  const agent = startAgent({
    proxy: b.address('multiplex'),
    name: 'edge',
    ...ca.issue({ commonName: 'edge', usage: 'client' }),
    ca: ca.cert,
    serverName: 'localhost',
    resources: [echo.address],
    env: {},
    logger: agentLogs.logger,
  });
  t.teardown(() => agent.close());
  await agent.waitConnected(10_000);

  const peerB = { id: 'proxy-b', peerAddr: b.address('peer') };
  const stream = duplexOf(await proxyParts(a.proxy).peers.open(peerB, 'edge', echo.address, { client: '203.0.113.7:4242' }));
  t.equal(await echoOnce(stream, 'through the peer'), 'through the peer', 'bytes go A -> B -> agent -> target and back');
  await until(
    () => agentLogs.lines.some((l) => l.msg === 'stream opened' && l.client === '203.0.113.7:4242'),
    'the agent saw the client address',
  );
  t.pass('the client address reached the agent side');
  const second = duplexOf(await proxyParts(a.proxy).peers.open(peerB, 'edge', echo.address));
  t.equal(await echoOnce(second, 'again'), 'again');
  t.equal(b.stats('peer').accepted, 1, 'one peering session carries both streams');
  t.same(proxyParts(a.proxy).peers.connected(), ['proxy-b']);
  stream.end();
  second.end();

  const offline = await proxyParts(a.proxy)
    .peers.open(peerB, 'nobody', echo.address)
    .then(
      () => undefined,
      (err: GateError) => err,
    );
  t.equal(offline?.code, ErrorCodes.AGENT_OFFLINE, 'an agent B does not hold: B says offline, promptly');
  const denied = await proxyParts(a.proxy)
    .peers.open(peerB, 'edge', '127.0.0.1:9')
    .catch((err: GateError) => err);
  t.equal((denied as GateError).code, ErrorCodes.AGENT_TARGET_DENIED, "the agent's refusal keeps its code");

  proxyParts(a.proxy).peers.retain([]);
  t.same(proxyParts(a.proxy).peers.connected(), [], 'a peer that left the store: its session is closed');
  await until(() => b.stats('peer').open === 0, 'B saw the session end');
  const reopened = duplexOf(await proxyParts(a.proxy).peers.open(peerB, 'edge', echo.address));
  t.equal(await echoOnce(reopened, 'reconnected'), 'reconnected', 'the next dial opens a new session');
  reopened.end();
  t.equal(b.stats('peer').accepted, 2);
});

t.test('the peer port admits proxies only', async (t) => {
  const dataDir = await tempDir(t, 'cluster-data');
  const b = await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir, proxyService: { peer_listen_addr: '127.0.0.1:0' } });
  const ca = await clusterAuthority(dataDir);
  const port = b.port('peer');
  const refusals = (): number => b.stats('peer').failures[ErrorCodes.PEER_REFUSED] ?? 0;

  t.match(
    await peerPortAnswer(port, ca.cert, ca.issue({ commonName: 'edge', usage: 'client' })),
    /^GATE_ERR_PEER_REFUSED .*not a proxy's/,
    'an agent certificate is refused',
  );
  t.match(
    await peerPortAnswer(port, ca.cert, ca.issue({ commonName: 'alice', usage: 'both', dnsNames: ['alice'] })),
    /^GATE_ERR_PEER_REFUSED .*not a proxy's/,
    'a client certificate is refused',
  );
  t.match(await peerPortAnswer(port, ca.cert, undefined), /^GATE_ERR_PEER_REFUSED no certificate/, 'no certificate is refused');
  const foreign = devCertificates().ca.issue({ commonName: 'proxy', uris: [PEER_ROLE_URI], usage: 'both' });
  t.match(
    await peerPortAnswer(port, ca.cert, foreign),
    /^GATE_ERR_PEER_REFUSED .*not from this cluster's CA/,
    "another CA's proxy certificate is refused",
  );
  await until(() => refusals() === 4, 'every refusal recorded with its code');
  t.equal(
    await peerPortAnswer(port, ca.cert, ca.issue({ commonName: 'proxy', uris: [PEER_ROLE_URI], usage: 'both' })),
    'admitted',
    "a proxy certificate of the cluster's CA is admitted",
  );
  t.equal(refusals(), 4);
});

t.test('the peer client refuses a server that is not a proxy of the cluster', async (t) => {
  const dataDir = await tempDir(t, 'cluster-data');
  await startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir });
  const ca = await clusterAuthority(dataDir);
  const notAProxy = createTlsServer(
    { ...ca.issue({ commonName: 'localhost', ipAddresses: ['127.0.0.1'] }), ALPNProtocols: [ALPN_PEER_FRAMED] },
    (s) => s.on('error', () => {}),
  );
  const port = await listening(notAProxy);
  t.teardown(() => closeServer(notAProxy));
  const pool = new PeerPool({
    identity: () => ({ ...ca.issue({ commonName: 'proxy', uris: [PEER_ROLE_URI], usage: 'both' }), ca: ca.cert }),
  });
  t.teardown(() => pool.close());
  const err = (await pool.open({ id: 'x', peerAddr: `127.0.0.1:${port}` }, 'edge', '127.0.0.1:1').catch((e: GateError) => e)) as GateError;
  t.equal(err.code, ErrorCodes.PEER_DIAL_FAILED);
  t.match(err.message, /is not a proxy of this cluster/, "a server certificate of the cluster's CA without the proxy role");
  const closed = (await pool.open({ id: 'y', peerAddr: '127.0.0.1:1' }, 'edge', '127.0.0.1:1').catch((e: GateError) => e)) as GateError;
  t.equal(closed.code, ErrorCodes.PEER_DIAL_FAILED, 'a peer address nothing listens on');
});

t.test("one peering session carries more than a tunnel's 1,000 streams (two agents, 1,100 at once)", async (t) => {
  const dataDir = await tempDir(t, 'cluster-data');
  const start = (): Promise<RunningGateProxy> =>
    startGateProxy(t, { mode: 'multiplex', upstreams: {}, dataDir, proxyService: { peer_listen_addr: '127.0.0.1:0' } });
  const a = await start();
  const b = await start();
  const ca = await clusterAuthority(dataDir);
  const echo = await startEchoServer(t);
  for (const name of ['edge-1', 'edge-2']) {
    const agent = startAgent({
      proxy: b.address('multiplex'),
      name,
      ...ca.issue({ commonName: name, usage: 'client' }),
      ca: ca.cert,
      serverName: 'localhost',
      resources: [echo.address],
      env: {},
    });
    t.teardown(() => agent.close());
    await agent.waitConnected(10_000);
  }
  const peerB = { id: 'proxy-b', peerAddr: b.address('peer') };
  const streams = await Promise.all(
    Array.from({ length: 1100 }, (_, i) =>
      proxyParts(a.proxy)
        .peers.open(peerB, i % 2 === 0 ? 'edge-1' : 'edge-2', echo.address)
        .then(duplexOf),
    ),
  );
  const answers = await Promise.all(streams.map((s, i) => echoOnce(s, `s${i};`)));
  t.equal(answers.filter((text, i) => text === `s${i};`).length, 1100, 'all 1,100 streams open at once, each echoing its own bytes');
  t.equal(b.stats('peer').accepted, 1, 'over one peering session');
  for (const s of streams) s.end();
  await until(() => echo.accepted() === 1100, 'every target connection made');
});
