// The holder's side of a peering session: a peer that leaves with a FIN and no GOAWAY (its process killed) ends the
// session and the agent streams it held, and bytes cross the hop both ways in order.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { FramedDuplex } from '../../lib/tunnel-framing/framed-duplex.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import { type AnswerPayload, StreamKind, WireError } from '../../lib/tunnel-framing/frames.js';
import { ALPN_PEER_FRAMED, PEER_ROLE_URI } from '../../lib/wire/names.js';
import { handMadeAgent, peeredProxies } from '../helpers/hand-made-agent.js';
import { until } from '../helpers/net.js';

const { ca } = devCertificates();
const TARGET = '127.0.0.1:9';

/** A peer proxy reduced to its TLS socket and framed session with the holder on `port`. */
async function rawPeer(port: number): Promise<{ socket: TLSSocket; session: FramedSession }> {
  const pair = ca.issue({ commonName: 'proxy', uris: [PEER_ROLE_URI], usage: 'both' });
  // The chain is what counts between proxies (the holder's certificate names no host).
  const checkServerIdentity = (): undefined => undefined;
  const socket = tlsConnect({ port, host: '127.0.0.1', ALPNProtocols: [ALPN_PEER_FRAMED], ca: ca.cert, checkServerIdentity, ...pair });
  socket.on('error', () => {});
  await once(socket, 'secureConnect');
  const session = new FramedSession(socket, { side: 'dialer' });
  return { socket, session };
}

/** A forwarded dial to `agent`, as a Duplex, and its answer. */
function forwardedDial(session: FramedSession, agent: string): { stream: FramedDuplex; answer: Promise<AnswerPayload> } {
  const framed = session.open({ kind: StreamKind.CONNECT, target: TARGET, client: '', agent });
  const answer = once(framed, 'response').then(([a]) => a as AnswerPayload);
  const stream = new FramedDuplex(framed);
  stream.on('error', () => {});
  return { stream, answer };
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
  const { stream, answer } = forwardedDial(peer.session, agent);
  const [framed] = await connectP;
  framed.respond({ status: 200, code: '', reason: '' });
  const agentSide = new FramedDuplex(framed);
  agentSide.on('error', () => {}); // a reset: what the test reads from its close code
  return { rig, peer, stream, answer, agentSide };
}

t.test('bytes cross the peering hop both ways, in order, with half-close', async (t) => {
  const { stream, answer, agentSide } = await answeredDial(t, 'peer-bytes');
  t.equal((await answer).status, 200, "the agent's answer reaches the peer");

  // 4 MiB each way, a counter in every byte, so a lost, doubled or reordered chunk shows.
  const size = 4 * 1024 * 1024;
  const pattern = (offset: number): Buffer => Buffer.from(Array.from({ length: 65536 }, (_, i) => (offset + i) % 251));
  const received = (s: FramedDuplex): Promise<Buffer> =>
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
  t.equal(up.length, size, "every byte of the peer's reaches the agent, then its FIN");
  t.ok(up.equals(Buffer.concat(Array.from({ length: size / 65536 }, (_, i) => pattern(i * 65536)))), 'in order');
  // Half-close: the peer's direction ended, the agent's still carries its bytes.
  agentSide.end();
  const down = await atPeer;
  t.equal(down.length, size, "every byte of the agent's reaches the peer after the peer's FIN");
  t.ok(down.equals(up), 'in order');
});

t.test('a peer that leaves with a FIN and no GOAWAY takes its session and the agent streams it held with it', async (t) => {
  const { rig, peer, agentSide } = await answeredDial(t, 'peer-fin');
  // As a real agent does: the stream released with a FIN ends its side too.
  agentSide.once('end', () => agentSide.end());
  agentSide.resume();
  const agentClosed = once(agentSide.stream, 'close');

  // The TLS connection's FIN, with no GOAWAY before it: what a peer whose process died sends.
  peer.socket.end();
  await agentClosed;
  t.pass("the agent's stream for the forwarded dial closed");
  t.equal(agentSide.stream.closeCode ?? WireError.NO_ERROR, WireError.NO_ERROR, 'released with a FIN, not reset');
  // The session is gone: closing the peering server has nothing left to wait for.
  await rig.peering.close({ graceMs: 60_000 });
  t.equal(rig.peering.state, 'closed');
  await until(() => peer.socket.destroyed, "the holder closed the peer's connection");
});
