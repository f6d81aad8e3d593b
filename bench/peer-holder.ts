// The peered bench's second proxy (bench/peered-router.ts): it holds the agent's tunnel (the agent
// is its child, bench/tunnel-agent.ts) and serves forwarded dials on a peering listener, as a
// proxy of a cluster does for another. Certificates come in the environment from the front router;
// once the agent is registered it prints `peer <port>` on stdout.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Multiplexer, TunnelRegistry, tunnelRoute } from '../lib/index.js';
import { PeerServer } from '../lib/internal.js';
import { agentWaitMs } from './tunnel-side.js';

const env = process.env;
const ca = env.CLUSTER_CA ?? '';
const registry = new TunnelRegistry();
const tunnels = new Multiplexer({ routes: [tunnelRoute(registry, { cert: env.SERVER_CERT ?? '', key: env.SERVER_KEY ?? '', ca })] });
const { port: tunnelPort } = await tunnels.listen({ host: '127.0.0.1', port: 0 });
const agent = spawn(process.execPath, [...process.execArgv, fileURLToPath(new URL('./tunnel-agent.js', import.meta.url))], {
  env: { PROXY: `127.0.0.1:${tunnelPort}`, AGENT_CERT: env.AGENT_CERT, AGENT_KEY: env.AGENT_KEY, AGENT_CA: ca, TARGET: env.TARGET },
  // The agent exits when this pipe closes, that is with this holder, however it ends.
  stdio: ['pipe', 'inherit', 'inherit'],
});
await registry.waitFor('bench-agent', agentWaitMs());
const peering = new PeerServer({ registry });
const peers = new Multiplexer({
  routes: [
    { name: 'peer', match: { protocol: 'tls' }, handler: peering.endpoint({ cert: env.PEER_CERT ?? '', key: env.PEER_KEY ?? '', ca }) },
  ],
});
const { port: peerPort } = await peers.listen({ host: '127.0.0.1', port: 0, backlog: 4096 });
process.stdout.write(`peer ${peerPort}\n`);
process.once('SIGTERM', () => {
  agent.kill('SIGTERM');
  void Promise.all([peers.close({ graceMs: 1000 }), tunnels.close({ graceMs: 1000 })]).then(() => {
    peering.close();
    registry.close();
    process.exit(0);
  });
});
