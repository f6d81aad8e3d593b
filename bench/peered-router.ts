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
import { MemoryRouteStore, Multiplexer, PEER_ROLE_URI, TunnelRegistry, devCertificates, forward, viaTunnel } from '../lib/index.js';
import { ClusterDialer, PeerPool } from '../lib/internal.js';
import { envPort } from './env-port.js';
import { BENCH_AGENT, startTunnelSide } from './tunnel-side.js';

const port = (name: string): number => envPort('peered-router', name);

const listenPort = port('LISTEN_PORT');
const targetA = `127.0.0.1:${port('UPSTREAM_A_PORT')}`;
const upstreamB = { host: '127.0.0.1', port: port('UPSTREAM_B_PORT') };
/**
 * The handler for upstream A and what stops its processes: through this router's own tunnel
 * (LOCAL_TUNNEL=1, the comparison row), or through the holder over peering.
 */
async function routeToA(): Promise<{ handler: ReturnType<typeof viaTunnel>; close(): Promise<void> }> {
  if (process.env.LOCAL_TUNNEL === '1') {
    const side = await startTunnelSide(targetA);
    return { handler: viaTunnel(side.registry, BENCH_AGENT, targetA), close: side.close };
  }
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
      ...(process.env.BENCH_AGENT_WAIT_MS ? { BENCH_AGENT_WAIT_MS: process.env.BENCH_AGENT_WAIT_MS } : {}),
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
  await store.announce(
    { id: 'bench-holder', peerAddr: `127.0.0.1:${peerPort}`, version: '0.0.0', draining: false, channelFingerprint: '' },
    dayMs,
  );
  await store.holdTunnel({ agent: 'bench-agent', proxyId: 'bench-holder', generation: 1 }, dayMs);
  const ownPair = proxyCert();
  const pool = new PeerPool({ identity: () => ({ ...ownPair, ca: ca.cert }) });
  const registry = new TunnelRegistry();
  const dialer = new ClusterDialer({ registry, cluster: { store, member: self, peers: pool } });
  return {
    handler: viaTunnel(registry, BENCH_AGENT, targetA, { open: dialer.open }),
    close: async () => {
      holder.kill('SIGTERM');
      dialer.close();
      pool.close();
    },
  };
}
const a = await routeToA();

const mux = new Multiplexer({
  routes: [
    { name: 'bench', match: { sni: 'bench.local', alpn: 'gate-bench' }, handler: a.handler },
    { name: 'other', match: { protocol: ['tls', 'postgres', 'http1', 'h2', 'ssh'] }, handler: forward(upstreamB) },
  ],
});
await mux.listen({ host: '127.0.0.1', port: listenPort, backlog: 4096 });
process.stdout.write(`peered router listening on 127.0.0.1:${listenPort}\n`);
process.once('SIGTERM', () => {
  void mux
    .close({ graceMs: 1000 })
    .then(() => a.close())
    .then(() => process.exit(0));
});
