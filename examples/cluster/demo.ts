// `npm run demo:cluster`: a cluster of three proxies on this machine, as the end-to-end test runs
// it — redis-server (the shared route store), three `gate-mux proxy` processes with their own web,
// peering and diagnostics ports, HAProxy in front (PROXY v2, `/readyz` health checks) and one agent
// with two tunnels to distinct proxies. It prints what to run against it and tears everything down
// on Ctrl-C. Needs the Debian packages redis-server and haproxy; nothing leaves 127.0.0.1.
//
// The processes are started with the test suite's helpers (test/helpers/cluster.ts), so the demo
// and the test cannot drift apart.
import { join } from 'node:path';
import { startClusterProcesses, startClusterAgent, agentSaid } from '../../test/helpers/cluster.js';
import { tempDir } from '../../test/helpers/temp-dir.js';

const AGENT = 'demo-agent';
const POSTGRES = process.env.DEMO_POSTGRES ?? '127.0.0.1:5432';
const SSH = process.env.DEMO_SSH ?? '127.0.0.1:22';

/** What the helpers need from a test: cleanups (run on Ctrl-C, newest first) and peer checks. */
const cleanups: Array<() => unknown> = [];
const host = {
  teardown: (fn: () => unknown) => void cleanups.push(fn),
  fail: (message: string) => {
    throw new Error(message);
  },
  comment: (...message: unknown[]) => console.log(...message),
  skip: (name: string) => {
    throw new Error(`missing: ${name}`);
  },
};

async function stop(): Promise<void> {
  while (cleanups.length) {
    try {
      await cleanups.pop()!();
    } catch {
      // keep tearing down the rest
    }
  }
}

async function main(): Promise<void> {
  process.env.CI ??= 'true'; // a missing peer stops the demo with the package to install
  const cluster = await startClusterProcesses(host, {
    count: 3,
    presenceTtlSeconds: 10,
    upstreams: { postgres: `tunnel:${AGENT}/${POSTGRES}`, ssh: `tunnel:${AGENT}/${SSH}` },
  });
  if (!cluster) throw new Error('a peer is missing');
  const stateDir = join(await tempDir(host, 'demo-agent'), AGENT);
  const agent = startClusterAgent(host, cluster, { name: AGENT, stateDir, allow: [POSTGRES, SSH], connectionCount: 2 });
  await agentSaid(agent, (text) => (text.match(/tunnel up/g) ?? []).length >= 2);
  agent.child.stdout!.on('data', (d: Buffer) => process.stdout.write(`[agent] ${d}`));

  const lb = cluster.balancerPort;
  console.log(`
A cluster of ${cluster.proxies.length} proxies is up. Every client and agent uses one address: 127.0.0.1:${lb} (HAProxy).
  redis-server  127.0.0.1:${cluster.redis.port}    (redis-cli -p ${cluster.redis.port} --scan --pattern 'gate:*')
${cluster.proxies.map((p) => `  proxy${p.index + 1}        web 127.0.0.1:${p.ports.web}  peer 127.0.0.1:${p.ports.peer}  diag 127.0.0.1:${p.ports.diag}  (pid ${p.child.pid})`).join('\n')}
  agent ${AGENT}  two tunnels, allowed targets ${POSTGRES} and ${SSH}

Try:
  psql "host=localhost port=${lb} sslmode=verify-full sslrootcert=${cluster.caFile} user=postgres dbname=postgres"
  ssh -p ${lb} $USER@127.0.0.1
  curl -s 127.0.0.1:${cluster.proxies[0]!.ports.diag}/readyz; curl -s 127.0.0.1:${cluster.proxies[0]!.ports.diag}/metrics | grep gate_
  kill -9 ${cluster.proxies[0]!.child.pid}   # a proxy dies: clients keep working through the others
Ctrl-C stops everything.`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  console.log('\nstopping the cluster');
}

main()
  .catch((err: unknown) => {
    console.error(`demo:cluster: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  })
  .finally(stop);
