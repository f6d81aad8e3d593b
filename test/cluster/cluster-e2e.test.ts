// Several proxies as one cluster end to end, as an operator runs it, real parts only (examples/cluster/layout.ts, the
// layout `npm run demo:cluster` starts): redis-server, three `gate-mux proxy` processes with their
// own web, peering and diagnostics ports, HAProxy in front with send-proxy-v2 and /readyz health
// checks, one `gate-mux agent --connection-count 2` that reaches the cluster only through HAProxy
// and tinyproxy, and psql / ssh through HAProxy. Then, in order: every proxy serves the agent, the
// client's real address reaches the agent, the peer port refuses an agent's certificate and a client
// certificate, Redis restarts (everything re-registers), kill -9 of a proxy holding a tunnel (clients
// keep working, it leaves the store, the agent moves), SIGTERM with a psql session open (it finishes,
// new sessions go elsewhere), and a channel configuration that differs is reported.
import t from 'tap';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { RedisRouteStore } from '../../lib/cluster/redis-route-store.js';
import { ALPN_PEER_FRAMED } from '../../lib/wire/names.js';
import { describeResult, runClient } from '../helpers/clients.js';
import {
  agentSaid,
  clusterAuthority,
  startClusterAgent,
  startClusterProcesses,
  type ClusterProxy,
  type RunningCluster,
} from '../helpers/cluster.js';
import { run, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { startPostgres } from '../helpers/postgres.js';
import { httpGet, scrape } from '../helpers/prometheus.js';
import { stopProxyCommand } from '../helpers/proxy-command.js';
import { sshClientArgs, startSshd } from '../helpers/sshd.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

const AGENT = 'edge';

interface Readyz {
  ready: boolean;
  checks: { cluster?: { ready: boolean; detail: { proxyId: string; registered: boolean; channelMismatches: Array<{ proxyId: string }> } } };
}

async function readyz(proxy: ClusterProxy): Promise<{ status: number; body: Readyz }> {
  const res = await httpGet(proxy.ports.diag, '/readyz');
  return { status: res.status, body: JSON.parse(res.body) as Readyz };
}

async function proxyIdOf(proxy: ClusterProxy): Promise<string> {
  const { body } = await readyz(proxy);
  const id = body.checks.cluster?.detail.proxyId;
  if (!id) throw new Error(`no cluster detail in /readyz: ${JSON.stringify(body)}`);
  return id;
}

function alive(cluster: RunningCluster): ClusterProxy[] {
  return cluster.proxies.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
}

t.test('three proxies behind HAProxy, one agent with two tunnels, Redis as the route store', async (t) => {
  const [pg, sshd, tinyproxy] = [await startPostgres(t), await startSshd(t), await startTinyproxy(t)];
  const psql = requirePeer(t, 'psql', 'postgresql-client');
  const ssh = requirePeer(t, 'ssh', 'openssh-client');
  if (!pg || !sshd || !tinyproxy || !psql || !ssh) return;
  const targets = { postgres: `127.0.0.1:${pg.port}`, ssh: `127.0.0.1:${sshd.port}` };
  const cluster = await startClusterProcesses(t, {
    count: 3,
    presenceTtlSeconds: 3,
    upstreams: { postgres: `tunnel:${AGENT}/${targets.postgres}`, ssh: `tunnel:${AGENT}/${targets.ssh}` },
  });
  if (!cluster) return;
  const observer = new RedisRouteStore({ host: cluster.host, port: cluster.redis.port });
  t.teardown(() => observer.close());

  for (const proxy of cluster.proxies) {
    const { status, body } = await readyz(proxy);
    t.equal(status, 200, `proxy${proxy.index + 1} is ready: ${JSON.stringify(body)}`);
    t.equal(body.checks.cluster?.detail.registered, true, 'registered in the store');
  }
  await until(async () => (await observer.proxies()).length === 3, 'three proxies present in Redis');

  // The agent knows one address, the balancer, and reaches it through tinyproxy (HTTPS_PROXY).
  const stateDir = join(await tempDir(t, 'cluster-agent'), AGENT);
  const agent = startClusterAgent(t, cluster, {
    name: AGENT,
    stateDir,
    allow: [targets.postgres, targets.ssh],
    connectionCount: 2,
    httpsProxy: tinyproxy.url,
    logLevel: 'debug',
  });
  await agentSaid(agent, (text) => (text.match(/tunnel up: /g) ?? []).length >= 2);
  t.match(agent.output(), `via ${tinyproxy.url}`, 'the tunnels went through tinyproxy');
  await until(async () => new Set((await observer.holders(AGENT)).map((h) => h.proxyId)).size === 2, 'two distinct proxies hold the agent');

  // psql through HAProxy: round robin lands on every proxy, two of which hold the agent.
  const query = (sql: string) =>
    run(
      psql,
      [
        `host=localhost port=${cluster.balancerPort} sslmode=verify-full sslrootcert=${cluster.caFile} user=${pg.user} dbname=postgres`,
        '-Atc',
        sql,
      ],
      {
        env: { ...process.env, PGCONNECT_TIMEOUT: '10' },
        timeoutMs: 30_000,
      },
    );
  for (let i = 0; i < 6; i++) {
    const r = await query(`select 'through the cluster', ${i}`);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.trim(), `through the cluster|${i}`);
  }
  for (const proxy of cluster.proxies) {
    const metrics = await scrape(proxy.ports.diag);
    // psql's SSLRequest is the `postgres-startup` route (lib/proxy/listener-plan.ts).
    t.ok(metrics.value('gate_mux_route_connections_total{route="postgres-startup"}') >= 1, `proxy${proxy.index + 1} served psql`);
  }
  const peered = await Promise.all(
    cluster.proxies.map(async (p) => (await scrape(p.ports.diag)).value('gate_mux_peer_dials_total{outcome="ok"}')),
  );
  t.ok(peered.reduce((a, b) => a + b, 0) >= 1, `the proxy without the agent forwarded through a peer (${peered.join(', ')})`);

  const sshResult = await runClient(ssh, [...sshClientArgs(sshd, { port: cluster.balancerPort }), 'echo', 'ssh-through-the-cluster']);
  t.equal(sshResult.code, 0, describeResult(sshResult));
  t.equal(sshResult.stdout.toString().trim(), 'ssh-through-the-cluster', 'plaintext ssh through HAProxy, PROXY v2, a proxy and the agent');

  // The client's real address (HAProxy's PROXY v2 source) reaches the agent, through a peer or not.
  for (let i = 0; i < 3; i++) {
    const r = await run(
      psql,
      [
        `host=127.0.0.1 hostaddr=127.0.0.1 port=${cluster.balancerPort} sslmode=require user=${pg.user} dbname=postgres`,
        '-Atc',
        'select 1',
      ],
      {
        env: { ...process.env, PGCONNECT_TIMEOUT: '10' },
      },
    );
    t.equal(r.code, 0, r.stderr);
  }
  t.match(agent.output(), /"client":"127\.0\.0\.1:\d+"[^\n]*"msg":"stream opened"/, 'the agent logs the client address the balancer saw');

  // The peer port admits proxies only: an agent's certificate and a client certificate are refused.
  const ca = await clusterAuthority(cluster.layout.dataDirs[0]!);
  const agentPair = {
    cert: await readFile(join(stateDir, 'agent.pem'), 'utf8'),
    key: await readFile(join(stateDir, 'agent-key.pem'), 'utf8'),
  };
  const clientPair = ca.issue({ commonName: 'alice', usage: 'client' });
  const target = cluster.proxies[0]!;
  const refusedBefore = (await scrape(target.ports.diag)).value('gate_mux_connection_failures_total{code="GATE_ERR_PEER_REFUSED"}');
  for (const pair of [agentPair, clientPair]) {
    const socket = tlsConnect({
      host: '127.0.0.1',
      port: target.ports.peer,
      ...pair,
      ca: ca.cert,
      ALPNProtocols: [ALPN_PEER_FRAMED],
      // The peering certificate names a role, not a host (lib/proxy/certificates.ts): what is
      // tested here is the server refusing us, not our check of its name.
      checkServerIdentity: () => undefined,
    });
    socket.on('error', () => {});
    socket.resume();
    await once(socket, 'close');
  }
  await until(
    async () =>
      (await scrape(target.ports.diag)).value('gate_mux_connection_failures_total{code="GATE_ERR_PEER_REFUSED"}') === refusedBefore + 2,
    'both refused with GATE_ERR_PEER_REFUSED',
  );

  // Redis restarts empty: every proxy re-registers its presence and its tunnels by itself.
  await cluster.restartRedis();
  await until(async () => (await observer.proxies()).length === 3, 'three proxies present again', 15_000);
  await until(async () => (await observer.holders(AGENT)).length === 2, 'both tunnels recorded again', 15_000);
  const afterRedis = await query("select 'after the redis restart'");
  t.equal(afterRedis.code, 0, afterRedis.stderr);

  // kill -9 of a proxy holding a tunnel: clients keep working, it leaves the store within its TTL,
  // and the agent takes its second tunnel to the proxy left.
  const ids = await Promise.all(cluster.proxies.map(proxyIdOf));
  const holderIds = new Set((await observer.holders(AGENT)).map((h) => h.proxyId));
  const victim = cluster.proxies[ids.findIndex((id) => holderIds.has(id))]!;
  const victimId = ids[victim.index]!;
  const killed = once(victim.child, 'exit');
  victim.child.kill('SIGKILL');
  await killed;
  for (let i = 0; i < 4; i++) {
    const r = await query(`select 'after kill -9', ${i}`);
    t.equal(r.code, 0, r.stderr);
  }
  await until(async () => !(await observer.proxies()).some((p) => p.id === victimId), 'the killed proxy left the store', 15_000);
  await until(
    async () => {
      const held = (await observer.holders(AGENT)).map((h) => h.proxyId);
      return held.length === 2 && !held.includes(victimId);
    },
    'the agent holds two tunnels on the two proxies left',
    30_000,
  );

  // SIGTERM with a psql session open: the session finishes, new sessions go elsewhere.
  const long = query("select pg_sleep(3), 'the session finished'");
  let draining: ClusterProxy | undefined;
  await until(async () => {
    for (const proxy of alive(cluster)) {
      if ((await scrape(proxy.ports.diag)).value('gate_mux_route_connections_open{route="postgres-startup"}') >= 1) draining = proxy;
    }
    return draining !== undefined;
  }, 'the proxy carrying the long session');
  const stopped = stopProxyCommand(draining!.child);
  const during = await query("select 'during the drain'");
  t.equal(during.code, 0, during.stderr);
  t.equal(during.stdout.trim(), 'during the drain', 'a new session goes to the proxy left');
  const finished = await long;
  t.equal(finished.code, 0, finished.stderr);
  t.match(finished.stdout, /the session finished/, 'the open session finished across the drain');
  t.equal(await stopped, 0, 'the drained proxy exits 0');

  // A proxy restarted with another channel configuration: the others report the difference.
  const back = cluster.proxies[victim.index]!;
  const layout = { ...cluster.layout, channelVersions: cluster.proxies.map((p) => (p === back ? 'v9.9.9' : 'v0.1.0')) };
  const restarted = await cluster.restartProxy(back.index, layout);
  const restartedId = await proxyIdOf(restarted);
  const witness = alive(cluster).find((p) => p !== restarted)!;
  await until(
    async () => (await readyz(witness)).body.checks.cluster?.detail.channelMismatches.some((m) => m.proxyId === restartedId) ?? false,
    '/readyz names the mismatch',
    15_000,
  );
  t.equal((await readyz(witness)).status, 200, 'a mismatch is reported, not fatal');
  t.equal((await scrape(witness.ports.diag)).value('gate_mux_channel_mismatches'), 1, 'the metric counts it');
  t.match(witness.output(), restartedId, 'the log names the other proxy');
});
