// Which protocol peering speaks: the tunnel framing when both proxies know it, HTTP/2 when either
// is older, chosen at the TLS handshake by ALPN; and the holder joins either peering stream to
// either kind of agent tunnel, bytes, half-close and refusal codes intact.
import t from 'tap';
import { connect } from 'node:net';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import type { TunnelProtocolChoice } from '../../lib/tunnel/agent-tunnel.js';
import { isFramedStream, tunnelDuplex } from '../../lib/tunnel/tunnel-stream.js';
import { startEchoServer } from '../helpers/echo-servers.js';
import { peeredProxies } from '../helpers/hand-made-agent.js';
import { readUntil } from '../helpers/net.js';
import { agentCertificate } from '../helpers/tunnel-rig.js';

const { ca } = devCertificates();

/** A plaintext HTTP/1 client through the front proxy: what it writes comes back from the echo. */
async function echoThrough(port: number, body: string): Promise<string> {
  const request = `POST /echo HTTP/1.1\r\nhost: x\r\n\r\n${body}`;
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.end(request);
  const got = await readUntil(socket, (s) => s.length >= request.length);
  socket.destroy();
  return got === request ? 'echoed' : `got ${got.length} bytes of ${request.length}`;
}

const cases: Array<{ front: 'auto' | 'http2'; holder: 'auto' | 'http2'; agent: TunnelProtocolChoice; peering: 'framed' | 'http2' }> = [
  { front: 'auto', holder: 'auto', agent: 'auto', peering: 'framed' },
  { front: 'auto', holder: 'auto', agent: 'http2', peering: 'framed' },
  { front: 'http2', holder: 'auto', agent: 'auto', peering: 'http2' },
  { front: 'auto', holder: 'http2', agent: 'auto', peering: 'http2' },
];

for (const c of cases) {
  t.test(
    `a front proxy offering ${c.front}, a holder selecting ${c.holder}, an agent on ${c.agent}: peering on ${c.peering}`,
    async (t) => {
      const target = (await startEchoServer(t)).address;
      const name = `peer-proto-${cases.indexOf(c)}`;
      const rig = await peeredProxies(t, name, target, { front: c.front, holder: c.holder });
      const agent = startAgent({
        proxy: `127.0.0.1:${rig.holderPort}`,
        name,
        ...agentCertificate(name),
        ca: ca.cert,
        serverName: 'localhost',
        resources: [target],
        env: {},
        tunnelProtocol: c.agent,
      });
      t.teardown(() => agent.close());
      await agent.waitConnected();

      const peer = { id: 'holder', peerAddr: `127.0.0.1:${rig.holderPort}` };
      const stream = await rig.pool.open(peer, name, target, { client: '198.51.100.4:5000' });
      t.equal(isFramedStream(stream) ? 'framed' : 'http2', c.peering, `the peering stream is ${c.peering}`);
      const duplex = tunnelDuplex(stream);
      const body = 'x'.repeat(300_000);
      duplex.end(body);
      t.equal((await readUntil(duplex, (s) => s.length >= body.length)).length, body.length, 'every byte back, then the FIN both ways');

      t.equal(await echoThrough(rig.frontPort, 'y'.repeat(70_000)), 'echoed', 'a client of the front proxy goes through');

      const denied = await rig.pool.open(peer, name, '127.0.0.1:9').catch((err: GateError) => err);
      t.equal((denied as GateError).code, ErrorCodes.AGENT_TARGET_DENIED, "the agent's refusal keeps its code across the holder");
      const offline = await rig.pool.open(peer, 'nobody-here', target).catch((err: GateError) => err);
      t.equal((offline as GateError).code, ErrorCodes.AGENT_OFFLINE, 'an agent the holder does not hold: offline');
    },
  );
}
