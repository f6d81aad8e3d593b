// The client's first bytes travel with the stream's OPEN (OpenStreamOptions.firstBytes): the agent has
// them before it answers, writes them to its target first, and drops them with a refusal. On a
// peered route the holder passes them on with its own OPEN to the agent, so they reach the agent
// before any answer there too.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { ErrorCodes } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startAgent } from '../../lib/tunnel/agent.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import type { OpenPayload } from '../../lib/tunnel-framing/frames.js';
import { statusForCode } from '../../lib/tunnel/refusal-status.js';
import { handMadeAgent, peeredProxies, proxyViaAgent } from '../helpers/hand-made-agent.js';
import { closeServer, readUntil, startTaggedTlsServer, tlsClient, until } from '../helpers/net.js';
import { agentCertificate } from '../helpers/tunnel-rig.js';

const { ca } = devCertificates();
const TARGET = '127.0.0.1:9';

/** A TLS client (ALPN gate-bench, passed through) of the proxy on `port`: its ClientHello goes to the agent. */
function helloClient(port: number): TLSSocket {
  const client = connect(port, '127.0.0.1');
  client.on('error', () => {});
  const tls = tlsConnect({ socket: client, servername: 'localhost', ALPNProtocols: ['gate-bench'], ca: ca.cert });
  tls.on('error', () => {});
  return tls;
}

/** The agent's refusal of `stream`, as an agent sends one: a status, the code and a reason. */
function refuse(stream: FramedStream, code: string, reason: string): void {
  stream.respond({ status: statusForCode(code), code, reason });
}

/**
 * An HTTP/1 client that sends its request and its FIN at once, through the proxy on `port` to the
 * hand-made agent: the agent must have every byte before it answers, then the FIN; its answer
 * must come back to the client.
 */
async function requestWithFin(t: Test, port: number, nextConnect: () => Promise<[FramedStream, OpenPayload]>): Promise<void> {
  const streamP = nextConnect();
  const client = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  const request = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n';
  client.end(request);
  const [stream] = await streamP;
  let got = '';
  const ended = once(stream, 'end');
  stream.on('data', (d: Buffer) => (got += d.toString()));
  stream.resume();
  await until(() => got.length > 0, 'first bytes before the answer');
  stream.respond({ status: 200, code: '', reason: '' });
  await ended;
  t.equal(got, request, 'every byte, then the FIN');
  let answer = '';
  client.on('data', (d: Buffer) => (answer += d.toString()));
  stream.write(Buffer.from('HTTP/1.1 204 No Content\r\n\r\n'));
  stream.end();
  await once(client, 'end');
  t.equal(answer, 'HTTP/1.1 204 No Content\r\n\r\n');
  client.destroy();
}

t.test("a passed-through TLS client's ClientHello reaches the agent before it answers, and the handshake completes", async (t) => {
  const upstream = await startTaggedTlsServer('behind-agent');
  t.teardown(() => closeServer(upstream.server));
  const target = `127.0.0.1:${upstream.port}`;
  const side = await proxyViaAgent(t, 'agent-hello', target);

  // First a hand-made agent, to see what arrives with the OPEN before any answer.
  const raw = await handMadeAgent(t, side.port, side.registry, 'agent-hello');
  const streamP = raw.nextConnect();
  const tls = helloClient(side.port);
  const [stream, open] = await streamP;
  t.equal(open.target, target);
  const firstP = once(stream, 'data');
  stream.resume();
  const [first] = (await firstP) as [Buffer];
  t.equal(first[0], 0x16, 'a TLS handshake record arrived before the answer');
  t.equal(first[5], 0x01, 'it is the ClientHello');
  refuse(stream, ErrorCodes.AGENT_TARGET_DENIED, 'not this one');
  await new Promise((resolve) => tls.once('close', resolve));
  await until(() => side.mux.stats().failures[ErrorCodes.AGENT_TARGET_DENIED] === 1, 'the refusal recorded with its code');
  raw.session.destroy();
  await until(() => !side.registry.has('agent-hello'), 'the hand-made agent gone');

  // Then a real agent: the hello it got with the OPEN is written to the target first.
  const agent = startAgent({
    proxy: `127.0.0.1:${side.port}`,
    name: 'agent-hello',
    ...agentCertificate('agent-hello'),
    ca: ca.cert,
    serverName: 'localhost',
    resources: [target],
    env: {},
    backoff: { initialMs: 50, maxMs: 400 },
  });
  t.teardown(() => agent.close());
  await agent.waitConnected();
  const secure = await tlsClient(side.port, { servername: 'localhost', ALPNProtocols: ['gate-bench'], ca: ca.cert });
  t.teardown(() => secure.destroy());
  t.match(await readUntil(secure, (s) => s.includes('\n')), /^behind-agent sni=localhost/);
  secure.write('ping\n');
  t.match(await readUntil(secure, (s) => s.includes('ping')), /ping/, 'echoed through the tunnel');
});

t.test('a client that sends its request and its FIN at once: the agent gets both, the answer comes back', async (t) => {
  const side = await proxyViaAgent(t, 'agent-fin', TARGET);
  const raw = await handMadeAgent(t, side.port, side.registry, 'agent-fin');
  await requestWithFin(t, side.port, raw.nextConnect);
  t.equal(side.mux.stats().failures[ErrorCodes.AGENT_STREAM_FAILED], undefined);
});

t.test(
  'on a peered route the holder passes the ClientHello on with its OPEN: the agent has it before it answers; a refusal keeps its code',
  async (t) => {
    const side = await peeredProxies(t, 'agent-peered', TARGET);
    const raw = await handMadeAgent(t, side.holderPort, side.registry, 'agent-peered');

    const streamP = raw.nextConnect();
    const tls = helloClient(side.frontPort);
    let answered = false;
    tls.once('data', () => (answered = true));
    const [stream, open] = await streamP;
    t.equal(open.target, TARGET);
    // The agent (this test) has answered nothing, so the holder has not either: the bytes came early.
    const firstP = once(stream, 'data');
    stream.resume();
    const [first] = (await firstP) as [Buffer];
    t.equal(first[0], 0x16, 'a TLS handshake record reached the agent before its answer, through both proxies');
    t.equal(first[5], 0x01, 'it is the ClientHello');
    t.notOk(answered, 'the front proxy had nothing to pass back yet');
    refuse(stream, ErrorCodes.AGENT_TARGET_DENIED, 'not this one');
    await new Promise((resolve) => tls.once('close', resolve));
    t.notOk(answered, 'the refused client got no bytes, only its close');
    await until(
      () => side.front.stats().failures[ErrorCodes.AGENT_TARGET_DENIED] === 1,
      "the agent's refusal recorded at the front with its code",
    );

    // A client whose FIN comes with its request: the holder takes both, the agent gets every byte
    // and the FIN, and its answer comes back through both proxies.
    await requestWithFin(t, side.frontPort, raw.nextConnect);
    t.equal(side.front.stats().failures[ErrorCodes.AGENT_STREAM_FAILED], undefined);
  },
);
