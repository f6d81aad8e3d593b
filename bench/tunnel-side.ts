// The proxy half of a bench tunnel, shared by the tunnelled router (bench/tunnel-router.ts) and the
// stream-setup measurement (bench/tunnel-setup.ts): a dev CA, a TunnelRegistry behind its own
// mutual-TLS listener, and an agent process (bench/tunnel-agent.ts) that serves `target`. The
// agent runs pinned to AGENT_CPUS when set (the bench puts it beside the upstreams, as the far end
// of the network would be), so the proxy's core is its own, as it is for the forward route.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Multiplexer, TunnelRegistry, devCertificates, tunnelRoute } from '../lib/index.js';

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

export async function startTunnelSide(target: string, agentCpus = process.env.AGENT_CPUS): Promise<TunnelSide> {
  const { ca, server } = devCertificates();
  const agentPair = ca.issue({ commonName: BENCH_AGENT, usage: 'client' });
  const registry = new TunnelRegistry();
  const tunnels = new Multiplexer({ routes: [tunnelRoute(registry, { ...server, ca: ca.cert })] });
  const { port: tunnelPort } = await tunnels.listen({ host: '127.0.0.1', port: 0 });
  const script = [...process.execArgv, fileURLToPath(new URL('./tunnel-agent.js', import.meta.url))];
  const [command, args] = agentCpus ? ['taskset', ['-c', agentCpus, process.execPath, ...script]] : [process.execPath, script];
  const agent = spawn(command, args, {
    env: { PROXY: `127.0.0.1:${tunnelPort}`, AGENT_NAME: BENCH_AGENT, AGENT_CERT: agentPair.cert, AGENT_KEY: agentPair.key, AGENT_CA: ca.cert, TARGET: target },
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
    },
  };
}
