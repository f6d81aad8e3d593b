// The holder joins a peering stream to the agent's tunnel stream: bytes, half-close and refusal
// codes intact, for a forwarded dial and for a client of the front proxy.
import t from 'tap';
import { connect } from 'node:net';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import { tunnelDuplex } from '../../lib/tunnel/tunnel-stream.js';
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

t.test('a forwarded dial and a front client go through the holder to the agent and back', async (t) => {
  const target = (await startEchoServer(t)).address;
  const name = 'peer-holder';
  const rig = await peeredProxies(t, name, target);
  const agent = startAgent({
    proxy: `127.0.0.1:${rig.holderPort}`,
    name,
    ...agentCertificate(name),
    ca: ca.cert,
    serverName: 'localhost',
    resources: [target],
    env: {},
  });
  t.teardown(() => agent.close());
  await agent.waitConnected();

  const peer = { id: 'holder', peerAddr: `127.0.0.1:${rig.holderPort}` };
  const stream = await rig.pool.open(peer, name, target, { client: '198.51.100.4:5000' });
  const duplex = tunnelDuplex(stream);
  const body = 'x'.repeat(300_000);
  duplex.end(body);
  t.equal((await readUntil(duplex, (s) => s.length >= body.length)).length, body.length, 'every byte back, then the FIN both ways');

  t.equal(await echoThrough(rig.frontPort, 'y'.repeat(70_000)), 'echoed', 'a client of the front proxy goes through');

  const denied = await rig.pool.open(peer, name, '127.0.0.1:9').catch((err: GateError) => err);
  t.equal((denied as GateError).code, ErrorCodes.AGENT_TARGET_DENIED, "the agent's refusal keeps its code across the holder");
  const offline = await rig.pool.open(peer, 'nobody-here', target).catch((err: GateError) => err);
  t.equal((offline as GateError).code, ErrorCodes.AGENT_OFFLINE, 'an agent the holder does not hold: offline');
});
