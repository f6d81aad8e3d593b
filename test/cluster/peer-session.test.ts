// The holder's side of a peering session, on the TLS socket's native stream (no JavaScript read
// and write per chunk): a peer that leaves with a FIN and no GOAWAY (its process killed) ends the
// session and the agent streams it held, and bytes cross the hop both ways in order.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect as h2Connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { ALPN_PEER, PEER_AGENT_HEADER, PEER_ROLE_URI } from '../../lib/wire/names.js';
import { handMadeAgent, peeredProxies } from '../helpers/hand-made-agent.js';
import { until } from '../helpers/net.js';

const { ca } = devCertificates();
const TARGET = '127.0.0.1:9';

/** A peer proxy reduced to its TLS socket and HTTP/2 session with the holder on `port`. */
async function rawPeer(port: number): Promise<{ socket: TLSSocket; session: ClientHttp2Session }> {
  const pair = ca.issue({ commonName: 'proxy', uris: [PEER_ROLE_URI], usage: 'both' });
  // The chain is what counts between proxies (the holder's certificate names no host).
  const checkServerIdentity = (): undefined => undefined;
  const socket = tlsConnect({ port, host: '127.0.0.1', ALPNProtocols: [ALPN_PEER], ca: ca.cert, checkServerIdentity, ...pair });
  socket.on('error', () => {});
  await once(socket, 'secureConnect');
  const session = h2Connect('http://peer', { createConnection: () => socket });
  session.on('error', () => {});
  return { socket, session };
}

function forwardedDial(session: ClientHttp2Session, agent: string): ClientHttp2Stream {
  const stream = session.request({ ':method': 'CONNECT', ':authority': TARGET, [PEER_AGENT_HEADER]: agent });
  stream.on('error', () => {});
  return stream;
}

/**
 * A peered rig with a hand-made agent, a raw peer, and one forwarded dial to `agent` that the
 * agent has answered 200: its stream at the peer and at the agent.
 */
async function answeredDial(t: Test, agent: string) {
  const rig = await peeredProxies(t, agent, TARGET);
  const raw = await handMadeAgent(t, rig.holderPort, rig.registry, agent);
  const peer = await rawPeer(rig.holderPort);
  t.teardown(() => peer.socket.destroy());
  const connectP = raw.nextConnect();
  const stream = forwardedDial(peer.session, agent);
  const [agentSide] = await connectP;
  agentSide.respond({ ':status': 200 });
  return { rig, peer, stream, agentSide };
}

t.test('bytes cross the peering hop both ways, in order, with half-close', async (t) => {
  const { stream, agentSide } = await answeredDial(t, 'peer-bytes');
  const [headers] = (await once(stream, 'response')) as [Record<string, unknown>];
  t.equal(headers[':status'], 200, "the agent's answer reaches the peer");

  // 4 MiB each way, a counter in every byte, so a lost, doubled or reordered chunk shows.
  const size = 4 * 1024 * 1024;
  const pattern = (offset: number): Buffer => Buffer.from(Array.from({ length: 65536 }, (_, i) => (offset + i) % 251));
  const received = (s: ClientHttp2Stream | typeof agentSide): Promise<Buffer> =>
    new Promise((resolve) => {
      const chunks: Buffer[] = [];
      s.on('data', (c: Buffer) => chunks.push(c));
      s.once('end', () => resolve(Buffer.concat(chunks)));
    });
  const atAgent = received(agentSide);
  const atPeer = received(stream);
  for (let offset = 0; offset < size; offset += 65536) {
    stream.write(pattern(offset));
    agentSide.write(pattern(offset));
  }
  stream.end();
  const up = await atAgent;
  t.equal(up.length, size, "every byte of the peer's reaches the agent, then its END_STREAM");
  t.ok(up.equals(Buffer.concat(Array.from({ length: size / 65536 }, (_, i) => pattern(i * 65536)))), 'in order');
  // Half-close: the peer's direction ended, the agent's still carries its bytes.
  agentSide.end();
  const down = await atPeer;
  t.equal(down.length, size, "every byte of the agent's reaches the peer after the peer's END_STREAM");
  t.ok(down.equals(up), 'in order');
});

t.test('a peer that leaves with a FIN and no GOAWAY takes its session and the agent streams it held with it', async (t) => {
  const { rig, peer, agentSide } = await answeredDial(t, 'peer-fin');
  // As a real agent does: the stream released with END_STREAM ends its side too.
  agentSide.once('end', () => agentSide.end());
  const agentClosed = once(agentSide, 'close');

  // The TLS connection's FIN, with no GOAWAY before it: what a peer whose process died sends.
  peer.socket.end();
  await agentClosed;
  t.pass("the agent's stream for the forwarded dial closed");
  t.equal(agentSide.rstCode, 0, 'released with END_STREAM, not reset');
  // The session is gone: closing the peering server has nothing left to wait for.
  await rig.peering.close({ graceMs: 60_000 });
  t.equal(rig.peering.state, 'closed');
  await until(() => peer.socket.destroyed, "the holder closed the peer's connection");
});
