// The peered bench router: the same rule as bench/router.ts (SNI bench.local + ALPN gate-bench ->
// upstream A, everything else -> B), but upstream A is behind an agent whose tunnel *another* proxy
// holds (bench/peer-holder.ts, a child, whose child is the agent): per client connection this
// router asks its route store for the holders (an in-memory store here: no Redis round trip in the
// figure) and opens one CONNECT stream in the mutual-TLS HTTP/2 peering session to the holder,
// which opens one in the agent's tunnel. The difference to `gate-mux-tunnel` is the peering hop.
// The measured process tree is the router, the holder and the agent.
import { spawn } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ClusterDialer, MemoryRouteStore, Multiplexer, PEER_ROLE_URI, PeerPool, TunnelRegistry, devCertificates, forward, viaTunnel } from '../lib/index.js';
import { envPort } from './env-port.js';

const port = (name: string): number => envPort('peered-router', name);

const listenPort = port('LISTEN_PORT');
const targetA = `127.0.0.1:${port('UPSTREAM_A_PORT')}`;
const upstreamB = { host: '127.0.0.1', port: port('UPSTREAM_B_PORT') };
const { ca, server } = devCertificates();
const proxyCert = (): { cert: string; key: string } => ca.issue({ commonName: 'gate-mux proxy', uris: [PEER_ROLE_URI], usage: 'both' });
const agentPair = ca.issue({ commonName: 'bench-agent', usage: 'client' });
const holderPair = proxyCert();
const holder = spawn(process.execPath, [...process.execArgv, fileURLToPath(new URL('./peer-holder.js', import.meta.url))], {
  env: {
    CLUSTER_CA: ca.cert,
    SERVER_CERT: server.cert,
    SERVER_KEY: server.key,
    PEER_CERT: holderPair.cert,
    PEER_KEY: holderPair.key,
    AGENT_CERT: agentPair.cert,
    AGENT_KEY: agentPair.key,
    TARGET: targetA,
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const lines = createInterface({ input: holder.stdout! });
const [line] = (await Promise.race([once(lines, 'line'), once(holder, 'exit').then(() => ['exited'])])) as [string];
const peerPort = /^peer (\d+)$/.exec(line)?.[1];
if (!peerPort) {
  process.stderr.write(`peered-router: the holder did not start (${line})\n`);
  process.exit(1);
}

// The cluster as this router sees it: itself and the holder, live for the whole run.
const store = new MemoryRouteStore();
const self = Object.assign(new EventEmitter(), { proxyId: 'bench-front' });
const dayMs = 24 * 60 * 60 * 1000;
await store.announce({ id: 'bench-holder', peerAddr: `127.0.0.1:${peerPort}`, version: '0.0.0', draining: false, channelFingerprint: '' }, dayMs);
await store.holdTunnel({ agent: 'bench-agent', proxyId: 'bench-holder', generation: 1 }, dayMs);
const ownPair = proxyCert();
const pool = new PeerPool({ identity: () => ({ ...ownPair, ca: ca.cert }) });
const registry = new TunnelRegistry();
const dialer = new ClusterDialer({ registry, store, member: self, peers: pool });

const mux = new Multiplexer({
  routes: [
    { name: 'bench', match: { sni: 'bench.local', alpn: 'gate-bench' }, handler: viaTunnel(registry, 'bench-agent', targetA, { open: dialer.open }) },
    { name: 'other', match: { protocol: ['tls', 'postgres', 'http1', 'h2', 'ssh'] }, handler: forward(upstreamB) },
  ],
});
await mux.listen({ host: '127.0.0.1', port: listenPort, backlog: 4096 });
process.stdout.write(`peered router listening on 127.0.0.1:${listenPort} (holder peering on 127.0.0.1:${peerPort})\n`);
process.once('SIGTERM', () => {
  holder.kill('SIGTERM');
  void mux.close({ graceMs: 1000 }).then(() => {
    dialer.close();
    pool.close();
    process.exit(0);
  });
});
