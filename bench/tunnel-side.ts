// The proxy half of a bench tunnel, shared by the tunnelled router (bench/tunnel-router.ts) and the
// stream-setup measurement (bench/tunnel-setup.ts): a dev CA, a TunnelRegistry behind its own
// mutual-TLS listener, and an agent process (bench/tunnel-agent.ts) that serves `target`. The
// agent runs pinned to AGENT_CPUS when set (the bench puts it beside the upstreams, as the far end
// of the network would be), so the proxy's core is its own, as it is for the forward route.
// With TUNNEL_UPGRADE=1 the agent's tunnel goes through the connection upgrade (the path behind a
// load balancer that ends TLS): the tunnel listener also serves HTTPS with the upgrade, and the
// agent is told to upgrade, so the measured cost is the extra layer alone (TLS to the listener,
// WebSocket framing, then the tunnel's own TLS inside), with no balancer process in between.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer as createHttpsServer } from 'node:https';
import { fileURLToPath } from 'node:url';
import { ConnectionUpgrade, Multiplexer, TunnelRegistry, devCertificates, serve, tunnelRoute } from '../lib/index.js';

export const BENCH_AGENT = 'bench-agent';

/**
 * How long a bench router waits for its agent's tunnel: 30 s, or BENCH_AGENT_WAIT_MS (the
 * instruction count runs every process under callgrind, tens of times slower).
 */
export function agentWaitMs(): number {
  return Number(process.env.BENCH_AGENT_WAIT_MS) || 30_000;
}

export interface TunnelSide {
  registry: TunnelRegistry;
  agent: ChildProcess;
  tunnelPort: number;
  close(): Promise<void>;
}

export async function startTunnelSide(
  target: string,
  agentCpus = process.env.AGENT_CPUS,
  upgrade = process.env.TUNNEL_UPGRADE === '1',
): Promise<TunnelSide> {
  const { ca, server } = devCertificates();
  const agentPair = ca.issue({ commonName: BENCH_AGENT, usage: 'client' });
  const registry = new TunnelRegistry();
  const web = createHttpsServer({ ...server });
  const tunnels = new Multiplexer({
    routes: [
      tunnelRoute(registry, { ...server, ca: ca.cert }),
      ...(upgrade ? [{ name: 'web', match: { alpn: 'http/1.1' }, handler: serve(web) }] : []),
    ],
  });
  const connectionUpgrade = new ConnectionUpgrade({ target: tunnels });
  connectionUpgrade.attach(web);
  const { port: tunnelPort } = await tunnels.listen({ host: '127.0.0.1', port: 0 });
  const script = [...process.execArgv, fileURLToPath(new URL('./tunnel-agent.js', import.meta.url))];
  const [command, args] = agentCpus ? ['taskset', ['-c', agentCpus, process.execPath, ...script]] : [process.execPath, script];
  const agent = spawn(command, args, {
    env: {
      PROXY: `127.0.0.1:${tunnelPort}`,
      AGENT_NAME: BENCH_AGENT,
      AGENT_CERT: agentPair.cert,
      AGENT_KEY: agentPair.key,
      AGENT_CA: ca.cert,
      TARGET: target,
      AGENT_UPGRADE: upgrade ? '1' : '0',
    },
    // The agent exits when this pipe closes: with its router, however that ends (even SIGKILL, or
    // a SIGTERM before the router's own handler is set), never reconnecting on its own for ever.
    stdio: ['pipe', 'inherit', 'inherit'],
  });
  await registry.waitFor(BENCH_AGENT, agentWaitMs());
  return {
    registry,
    agent,
    tunnelPort,
    close: async () => {
      const exited = agent.exitCode === null ? new Promise((resolve) => agent.once('exit', resolve)) : Promise.resolve();
      agent.kill('SIGTERM');
      await Promise.all([tunnels.close({ graceMs: 1000 }), exited]);
      registry.close();
      connectionUpgrade.close();
    },
  };
}
