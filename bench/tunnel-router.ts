// The tunnelled bench router: the same rule as bench/router.ts (SNI bench.local + ALPN gate-bench
// -> upstream A, everything else -> B), but upstream A is reached through an agent's reverse
// tunnel: the proxy opens one HTTP/2 CONNECT stream per client connection in the session the agent
// (a child process, so the peer's measured process tree is proxy + agent) holds open over mutual
// TLS. The client's TLS passes through to A unchanged, as on the forward route, so the difference
// between the two peers is the tunnel's cost. The agent connects to a listener of its own first;
// LISTEN_PORT opens only once it is registered, so the runner's first routing check finds it up.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Multiplexer, TunnelRegistry, devCertificates, forward, tunnelRoute, viaTunnel } from '../lib/index.js';
import { envPort } from './env-port.js';

const port = (name: string): number => envPort('tunnel-router', name);

const listenPort = port('LISTEN_PORT');
const targetA = `127.0.0.1:${port('UPSTREAM_A_PORT')}`;
const upstreamB = { host: '127.0.0.1', port: port('UPSTREAM_B_PORT') };
const { ca, server } = devCertificates();
const agentPair = ca.issue({ commonName: 'bench-agent', usage: 'client' });

const registry = new TunnelRegistry();
const tunnels = new Multiplexer({ routes: [tunnelRoute(registry, { ...server, ca: ca.cert })] });
const { port: tunnelPort } = await tunnels.listen({ host: '127.0.0.1', port: 0 });
const agent = spawn(process.execPath, [...process.execArgv, fileURLToPath(new URL('./tunnel-agent.js', import.meta.url))], {
  env: { PROXY: `127.0.0.1:${tunnelPort}`, AGENT_CERT: agentPair.cert, AGENT_KEY: agentPair.key, AGENT_CA: ca.cert, TARGET: targetA },
  stdio: ['ignore', 'inherit', 'inherit'],
});
await registry.waitFor('bench-agent', 30_000);

const mux = new Multiplexer({
  routes: [
    { name: 'bench', match: { sni: 'bench.local', alpn: 'gate-bench' }, handler: viaTunnel(registry, 'bench-agent', targetA) },
    { name: 'other', match: { protocol: ['tls', 'postgres', 'http1', 'h2', 'ssh'] }, handler: forward(upstreamB) },
  ],
});
await mux.listen({ host: '127.0.0.1', port: listenPort, backlog: 4096 });
process.stdout.write(`tunnel router listening on 127.0.0.1:${listenPort} (agent via 127.0.0.1:${tunnelPort})\n`);
process.once('SIGTERM', () => {
  agent.kill('SIGTERM');
  void Promise.all([mux.close({ graceMs: 1000 }), tunnels.close({ graceMs: 1000 })]).then(() => {
    registry.close();
    process.exit(0);
  });
});
