// Which protocol a tunnel speaks: the framing when both ends know it, HTTP/2 when either end is
// older, chosen at the TLS handshake by ALPN; and a tunnel of either kind carries clients the same.
import t from 'tap';
import { once } from 'node:events';
import { terminate } from '../../lib/handlers/builders.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { type AgentConnectedEvent, startAgent, type TunnelAgent } from '../../lib/tunnel/agent.js';
import { tunnelAlpns, tunnelProtocolFromEnv, type TunnelProtocolChoice } from '../../lib/tunnel/agent-tunnel.js';
import { TunnelRegistry } from '../../lib/tunnel/registry.js';
import { viaTunnel } from '../../lib/tunnel/via-tunnel.js';
import { ALPN_REVERSE_TUNNEL, ALPN_REVERSE_TUNNEL_FRAMED } from '../../lib/wire/names.js';
import type { Teardownable } from '../helpers/daemon.js';
import { startEchoServer } from '../helpers/echo-servers.js';
import { readUntil, tlsClient } from '../helpers/net.js';
import { agentCertificate } from '../helpers/tunnel-rig.js';

const { ca, server } = devCertificates();

/**
 * A proxy whose tunnel endpoint selects among `alpns` (the server's order decides), and a client
 * route `echo` to `target` through agent `name`.
 */
async function proxy(t: Teardownable, alpns: string[], name: string, target: string): Promise<{ port: number; registry: TunnelRegistry }> {
  const registry = new TunnelRegistry();
  const mux = new Multiplexer({
    routes: [
      {
        name: 'tunnel',
        match: { alpn: [ALPN_REVERSE_TUNNEL_FRAMED, ALPN_REVERSE_TUNNEL], protocol: 'tls' },
        handler: terminate(
          { ...server, ca: ca.cert, alpnProtocols: alpns, requestCert: true, rejectUnauthorized: false },
          registry.handler(),
        ),
      },
      {
        name: 'echo',
        match: { alpn: 'echo' },
        handler: terminate({ ...server, alpnProtocols: ['echo'] }, viaTunnel(registry, name, target)),
      },
    ],
  });
  const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(async () => {
    const closed = mux.close({ graceMs: 0 });
    registry.close();
    await closed;
  });
  return { port, registry };
}

function agent(t: Teardownable, port: number, name: string, target: string, tunnelProtocol?: TunnelProtocolChoice): TunnelAgent {
  const a = startAgent({
    proxy: `127.0.0.1:${port}`,
    name,
    ...agentCertificate(name),
    ca: ca.cert,
    serverName: 'localhost',
    resources: [target],
    env: {},
    backoff: { initialMs: 50, maxMs: 400 },
    ...(tunnelProtocol ? { tunnelProtocol } : {}),
  });
  t.teardown(() => a.close());
  return a;
}

async function echoThrough(port: number, text: string): Promise<string> {
  const socket = await tlsClient(port, { servername: 'localhost', ALPNProtocols: ['echo'] });
  socket.end(text);
  const got = await readUntil(socket, (s) => s.length >= text.length);
  socket.destroy();
  return got;
}

const cases: Array<{ what: string; alpns: string[]; choice?: TunnelProtocolChoice; expect: 'framed' | 'http2' }> = [
  {
    what: 'an agent and a proxy of this release speak the framing',
    alpns: [ALPN_REVERSE_TUNNEL_FRAMED, ALPN_REVERSE_TUNNEL],
    expect: 'framed',
  },
  {
    what: 'an agent that offers HTTP/2 alone (an older agent) is served on HTTP/2',
    alpns: [ALPN_REVERSE_TUNNEL_FRAMED, ALPN_REVERSE_TUNNEL],
    choice: 'http2',
    expect: 'http2',
  },
  { what: 'a proxy that knows HTTP/2 alone (an older proxy) is spoken to on HTTP/2', alpns: [ALPN_REVERSE_TUNNEL], expect: 'http2' },
];

for (const c of cases) {
  t.test(c.what, async (t) => {
    const target = (await startEchoServer(t)).address;
    const name = `proto-${c.expect}-${cases.indexOf(c)}`;
    const side = await proxy(t, c.alpns, name, target);
    const a = agent(t, side.port, name, target, c.choice);
    const [connected] = (await once(a, 'connected')) as [AgentConnectedEvent];
    t.equal(connected.protocol, c.expect, `the agent says ${c.expect}`);
    t.same(
      a.tunnels.map((x) => x.protocol),
      [c.expect],
    );
    t.same(side.registry.agentsByProtocol(), { [c.expect]: 1 }, 'the proxy holds it on the same protocol');
    const text = `through a ${c.expect} tunnel `.repeat(2000);
    t.equal(await echoThrough(side.port, text), text, 'a client goes through, every byte back');
    t.equal(side.registry.streamStats.opened, 1);
  });
}

t.test('GATE_TUNNEL_PROTOCOL=http2 makes an agent offer HTTP/2 alone; anything else is auto', async (t) => {
  t.equal(tunnelProtocolFromEnv({ GATE_TUNNEL_PROTOCOL: 'http2' }), 'http2');
  t.equal(tunnelProtocolFromEnv({ GATE_TUNNEL_PROTOCOL: ' HTTP2 ' }), 'http2');
  t.equal(tunnelProtocolFromEnv({ GATE_TUNNEL_PROTOCOL: 'auto' }), 'auto');
  t.equal(tunnelProtocolFromEnv({ GATE_TUNNEL_PROTOCOL: 'h2c' }), 'auto');
  t.equal(tunnelProtocolFromEnv({}), 'auto');
  t.same(tunnelAlpns('http2'), [ALPN_REVERSE_TUNNEL]);
  t.same(tunnelAlpns(), [ALPN_REVERSE_TUNNEL_FRAMED, ALPN_REVERSE_TUNNEL], 'the framing first');
});

t.test('an agent started with GATE_TUNNEL_PROTOCOL=http2 in its environment speaks HTTP/2', async (t) => {
  const target = (await startEchoServer(t)).address;
  const side = await proxy(t, [ALPN_REVERSE_TUNNEL_FRAMED, ALPN_REVERSE_TUNNEL], 'proto-env', target);
  const a = startAgent({
    proxy: `127.0.0.1:${side.port}`,
    name: 'proto-env',
    ...agentCertificate('proto-env'),
    ca: ca.cert,
    serverName: 'localhost',
    resources: [target],
    env: { GATE_TUNNEL_PROTOCOL: 'http2' },
  });
  t.teardown(() => a.close());
  const [connected] = (await once(a, 'connected')) as [AgentConnectedEvent];
  t.equal(connected.protocol, 'http2');
  t.equal(await echoThrough(side.port, 'env'), 'env');
});
