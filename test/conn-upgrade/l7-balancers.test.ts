// TLS routing through real load balancers that end TLS (HAProxy `mode http`, nginx `http`), real
// parts only:
//   agent CLI (own process) ─┐
//   psql / ssh ─ gate-mux local-proxy CLI ─┴─► balancer (its own CA's certificate, idle timeout 2 s)
//     ─► GateProxy web port ─► connection upgrade ─► the proxy's multiplexer ─► tunnel / routes
// Each client is given only the balancer's address and trusts the balancer's CA the way any
// HTTPS client does (NODE_EXTRA_CA_CERTS); whether to upgrade is detected, not configured. The
// agent joins, holds its tunnel through three times the balancer's idle timeout with nothing to
// carry (the proxy's `alpn-ping` pings keep it alive), and serves psql and ssh. Then: the same
// agent pointed at the proxy itself does not upgrade, and through tinyproxy (HTTPS_PROXY) the
// upgrade goes inside CONNECT.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { CLUSTER_NAME, GIT_VERSION, startApiServer } from '../helpers/kube-api.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnAgentProcess, type AgentProcess } from '../helpers/agent-process.js';
import { describeResult, runClient } from '../helpers/clients.js';
import type { Teardownable } from '../helpers/daemon.js';
import { startGateProxy, type RunningGateProxy } from '../helpers/gate-proxy.js';
import { balancerCa, startHaproxyHttp, startNginxHttp, type BalancerCa, type L7Balancer } from '../helpers/l7-balancers.js';
import { readUntil, run, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { startPostgres, type RunningPostgres } from '../helpers/postgres.js';
import { sshClientArgs, startSshd, type RunningSshd } from '../helpers/sshd.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

const AGENT = fileURLToPath(new URL('../../examples/agent.js', import.meta.url));
const GATE_MUX = fileURLToPath(new URL('../../lib/cli/gate-mux.js', import.meta.url));
const IDLE_SECONDS = 2;

interface Rig {
  gate: RunningGateProxy;
  pg: RunningPostgres;
  sshd: RunningSshd;
  psql: string;
  ssh: string;
  lbCa: BalancerCa;
  token: string;
  targets: { postgres: string; ssh: string };
}

/** `gate-mux local-proxy` in its own process (`alpn` 'passthrough': --passthrough); resolves with the port it listens on. */
async function localProxyCli(t: Teardownable, rig: Rig, proxy: string, alpn: string, env: NodeJS.ProcessEnv): Promise<number> {
  const mode = alpn === 'passthrough' ? ['--passthrough'] : ['--alpn', alpn, '--ca', rig.gate.caFile, '--server-name', 'localhost'];
  const child = spawn(process.execPath, [GATE_MUX, 'local-proxy', '--listen', '127.0.0.1:0', '--proxy', proxy, ...mode], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  let out = '';
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  await readUntil(child.stdout, (s) => {
    out += s;
    return s.includes('\n');
  });
  const match = /listening on 127\.0\.0\.1:(\d+)/.exec(out);
  if (!match) throw new Error(`local-proxy did not start: ${out}`);
  return Number(match[1]);
}

function spawnAgent(t: Teardownable, rig: Rig, proxy: string, stateDir: string, env: NodeJS.ProcessEnv): AgentProcess {
  const args = [
    '--proxy',
    proxy,
    '--server-name',
    'localhost',
    '--name',
    'l7',
    '--state-dir',
    stateDir,
    '--allow',
    rig.targets.postgres,
    '--allow',
    rig.targets.ssh,
  ];
  return spawnAgentProcess(t, AGENT, [...args, '--token', rig.token, '--ca-pin', rig.gate.proxy.caPin], env);
}

async function stopAgent(rig: Rig, agent: AgentProcess): Promise<void> {
  agent.child.kill('SIGTERM');
  await agent.exited;
  await until(() => !rig.gate.proxy.tunnels.has('l7'), 'the agent unregistered', 10_000);
}

async function throughBalancer(t: Test, rig: Rig, lb: L7Balancer): Promise<void> {
  const env = { PATH: process.env.PATH, NODE_EXTRA_CA_CERTS: rig.lbCa.file };
  const stateDir = join(await tempDir(t, `agent-${lb.name}`), 'l7');
  // Every tunnel the proxy sees come and go: a balancer that cut the idle tunnel would show as a
  // second connection (the agent redials), whatever the agent printed meanwhile.
  const tunnelEvents: string[] = [];
  const onConnected = (): number => tunnelEvents.push('connected');
  const onDisconnected = (_name: string, why: string): number => tunnelEvents.push(`disconnected: ${why}`);
  rig.gate.proxy.tunnels.on('agent-connected', onConnected);
  rig.gate.proxy.tunnels.on('agent-disconnected', onDisconnected);
  t.teardown(() => {
    rig.gate.proxy.tunnels.off('agent-connected', onConnected);
    rig.gate.proxy.tunnels.off('agent-disconnected', onDisconnected);
  });
  const agent = spawnAgent(t, rig, lb.address, stateDir, env);
  await readUntil(agent.child.stdout!, () => agent.output().includes('tunnel up'));
  t.match(agent.output(), /joined as l7; identity kept in /, `${lb.name}: joined through the balancer`);
  t.match(
    agent.output(),
    'tunnel up: agent l7 via direct (connection upgrade)',
    `${lb.name}: the tunnel found the path ends TLS and upgraded`,
  );

  // Nothing to carry for three idle timeouts: the proxy's WebSocket pings keep the balancer from cutting it.
  await new Promise((resolve) => setTimeout(resolve, 3 * IDLE_SECONDS * 1000 + 500));
  t.same(
    tunnelEvents,
    ['connected'],
    `${lb.name}: the one tunnel survived ${3 * IDLE_SECONDS} s idle behind a ${IDLE_SECONDS} s idle timeout`,
  );

  const pgPort = await localProxyCli(t, rig, lb.address, 'gate-postgres', env);
  const query = await run(
    rig.psql,
    ['-h', '127.0.0.1', '-p', String(pgPort), '-U', rig.pg.user, '-d', 'postgres', '-Atc', "select 'through the balancer', 6 * 7"],
    {
      env: { ...process.env, PGSSLMODE: 'disable', PGCONNECT_TIMEOUT: '10' },
      timeoutMs: 20_000,
    },
  );
  t.equal(query.code, 0, query.stderr);
  t.equal(query.stdout.trim(), 'through the balancer|42', `${lb.name}: psql through local-proxy, the balancer, the upgrade and the tunnel`);

  const sshPort = await localProxyCli(t, rig, lb.address, 'gate-proxy-ssh', env);
  const sshResult = await runClient(rig.ssh, [...sshClientArgs(rig.sshd, { port: sshPort }), 'echo', `ssh-through-${lb.name}`]);
  t.equal(sshResult.code, 0, describeResult(sshResult));
  t.equal(sshResult.stdout.toString().trim(), `ssh-through-${lb.name}`, `${lb.name}: ssh through local-proxy and the balancer`);
  t.same(tunnelEvents, ['connected'], `${lb.name}: still the first tunnel, never redialled`);
  t.equal(agent.output().split('tunnel up').length - 1, 1, `${lb.name}: the agent brought one tunnel up`);
  await stopAgent(rig, agent);
}

t.test('agents, psql and ssh through L7 load balancers that end TLS', async (t) => {
  const [pg, sshd] = [await startPostgres(t), await startSshd(t)];
  const psql = requirePeer(t, 'psql', 'postgresql-client');
  const ssh = requirePeer(t, 'ssh', 'openssh-client');
  if (!pg || !sshd || !psql || !ssh) return;
  const targets = { postgres: `127.0.0.1:${pg.port}`, ssh: `127.0.0.1:${sshd.port}` };
  const kubeCa = CertificateAuthority.create('gate-mux l7 kube CA');
  const api = await startApiServer(kubeCa);
  t.teardown(() => {
    api.server.closeAllConnections();
    return new Promise<void>((resolve) => api.server.close(() => resolve()));
  });
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { postgres: `tunnel:l7/${targets.postgres}`, ssh: `tunnel:l7/${targets.ssh}`, kube: `127.0.0.1:${api.port}` },
    // Pings well inside the balancers' idle timeout; X-Forwarded-For believed from loopback.
    proxyService: { connection_upgrade_ping_interval: '500ms', connection_upgrade_trusted_networks: ['127.0.0.0/8'] },
  });
  const token = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  const rig: Rig = { gate, pg, sshd, psql, ssh, lbCa: balancerCa(t), token, targets };
  const lbOptions = { proxyPort: gate.port('multiplex'), proxyCaFile: gate.caFile, ca: rig.lbCa, idleSeconds: IDLE_SECONDS };

  await t.test('HAProxy mode http', async (t) => {
    const lb = await startHaproxyHttp(t, lbOptions);
    if (lb) await throughBalancer(t, rig, lb);
  });

  await t.test('nginx http reverse proxy', async (t) => {
    const lb = await startNginxHttp(t, lbOptions);
    if (lb) await throughBalancer(t, rig, lb);
  });

  await t.test('kubectl through HAProxy: its own TLS, end to end inside the upgrade, to a passthrough Kubernetes route', async (t) => {
    const kubectl = requirePeer(t, 'kubectl', 'kubernetes-client');
    const lb = await startHaproxyHttp(t, lbOptions);
    if (!kubectl || !lb) return;
    const env = { PATH: process.env.PATH, NODE_EXTRA_CA_CERTS: rig.lbCa.file };
    const port = await localProxyCli(t, rig, lb.address, 'passthrough', env);
    const user = kubeCa.issue({ commonName: 'l7-kube-user', usage: 'client' });
    const home = await tempDir(t, 'kube-home');
    const b64 = (text: string): string => Buffer.from(text).toString('base64');
    const config = join(home, 'config');
    await writeFile(
      config,
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'gate',
            cluster: {
              server: `https://127.0.0.1:${port}`,
              'tls-server-name': CLUSTER_NAME,
              'certificate-authority-data': b64(kubeCa.cert),
            },
          },
        ],
        users: [{ name: 'l7', user: { 'client-certificate-data': b64(user.cert), 'client-key-data': b64(user.key) } }],
        contexts: [{ name: 'l7', context: { cluster: 'gate', user: 'l7' } }],
        'current-context': 'l7',
      }),
      { mode: 0o600 },
    );
    const result = await runClient(kubectl, ['version', '-o', 'json', '--request-timeout=20s'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, KUBECONFIG: config },
    });
    t.equal(result.code, 0, describeResult(result));
    t.match(result.stdout.toString(), GIT_VERSION, "kubectl read the API server's version");
    const seen = api.seen.find((s) => s.path === '/version');
    t.equal(seen?.servername, CLUSTER_NAME, "the API server saw kubectl's own server name");
    t.equal(seen?.clientCn, 'l7-kube-user', "and kubectl's own client certificate: TLS passed through, not ended on the way");
  });

  await t.test('the same agent pointed at the proxy itself does not upgrade', async (t) => {
    const stateDir = join(await tempDir(t, 'agent-direct'), 'l7');
    const agent = spawnAgent(t, rig, gate.address('multiplex'), stateDir, { PATH: process.env.PATH });
    await readUntil(agent.child.stdout!, () => agent.output().includes('tunnel up'));
    t.match(agent.output(), /tunnel up: agent l7 via direct \(connection 1\)/, 'TLS reached the proxy: no upgrade');
    t.notMatch(agent.output(), /connection upgrade/);
    await stopAgent(rig, agent);
  });

  await t.test('through tinyproxy (HTTPS_PROXY), then HAProxy: the upgrade inside CONNECT', async (t) => {
    const tinyproxy = await startTinyproxy(t);
    const lb = await startHaproxyHttp(t, lbOptions);
    if (!tinyproxy || !lb) return;
    // 0.0.0.0 reaches the loopback balancer while the proxy rules do not treat it as loopback
    // (loopback is always dialled directly); the balancer's certificate names 0.0.0.0 too.
    const address = `0.0.0.0:${lb.port}`;
    const stateDir = join(await tempDir(t, 'agent-connect'), 'l7');
    const agent = spawnAgent(t, rig, address, stateDir, {
      PATH: process.env.PATH,
      NODE_EXTRA_CA_CERTS: rig.lbCa.file,
      HTTPS_PROXY: tinyproxy.url,
    });
    await readUntil(agent.child.stdout!, () => agent.output().includes('tunnel up'));
    t.match(agent.output(), `tunnel up: agent l7 via ${tinyproxy.url} (connection upgrade)`, 'through tinyproxy and the upgrade');
    t.ok(
      tinyproxy.output().split(`CONNECT ${address}`).length - 1 >= 3,
      'tinyproxy carried the CA fetch, the direct join attempt, the test handshake, the upgraded join and the tunnel',
    );
    await stopAgent(rig, agent);
  });
});
