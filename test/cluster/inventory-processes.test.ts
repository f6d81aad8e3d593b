// The inventory end to end, as an operator runs it, real parts only: redis-server, two
// `gate-mux proxy` processes behind HAProxy (examples/cluster/layout.ts), three `gate-mux agent`
// processes from the command line (two with GATE_EXT_UPGRADER=unit as the updater's unit sets it,
// one without; one holding tunnels on both proxies), and `gate-mux inventory ls` against either
// proxy's diagnostics listener. Then: an agent stops and leaves the listing within the TTL; a proxy
// is killed with SIGKILL and the other lists the agents that moved to it.
import t from 'tap';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { InventoryRow } from '../../lib/cluster/inventory.js';
import { packageVersion } from '../../lib/wire/package-version.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { agentSaid, startClusterAgent, startClusterProcesses, type ClusterAgent, type ClusterProxy } from '../helpers/cluster.js';
import { run, until } from '../helpers/net.js';
import { httpGet, scrape } from '../helpers/prometheus.js';
import { GATE_MUX } from '../helpers/proxy-command.js';
import { tempDir } from '../helpers/temp-dir.js';

// Not shorter: a live proxy stalled past its TTL (a loaded CI runner) would drop out of every listing.
const TTL_SECONDS = 6;

async function proxyIdOf(proxy: ClusterProxy): Promise<string> {
  const body = JSON.parse((await httpGet(proxy.ports.diag, '/readyz')).body) as { checks: { cluster?: { detail: { proxyId: string } } } };
  const id = body.checks.cluster?.detail.proxyId;
  if (!id) throw new Error(`no cluster detail in /readyz: ${JSON.stringify(body)}`);
  return id;
}

/** `gate-mux inventory ls ...args`, as an operator types it on the proxy's host. */
async function inventory(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return run(process.execPath, [GATE_MUX, 'inventory', 'ls', ...args], { timeoutMs: 20_000 });
}

async function rows(proxy: ClusterProxy): Promise<InventoryRow[]> {
  const r = await inventory('--format', 'json', '--diag', `127.0.0.1:${proxy.ports.diag}`);
  if (r.code !== 0) throw new Error(`inventory ls failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as InventoryRow[];
}

t.test("inventory ls on either proxy lists the cluster's agents once each; --upgrader=none the one to enroll", async (t) => {
  const cluster = await startClusterProcesses(t, {
    count: 2,
    upstreams: { postgres: 'tunnel:db-1/127.0.0.1:5432' },
    presenceTtlSeconds: TTL_SECONDS,
  });
  if (!cluster) return;
  const [p0, p1] = cluster.proxies as [ClusterProxy, ClusterProxy];
  const ids = [await proxyIdOf(p0), await proxyIdOf(p1)];
  const root = await tempDir(t, 'inventory-agents');
  // Each agent runs from the file `gate-mux agent configure` wrote for it: its services are the
  // file's resources (every resource kind is a service kind).
  const start = (name: string, connectionCount: number, upgrader: string | undefined, services: string[]): ClusterAgent =>
    startClusterAgent(t, cluster, {
      name,
      stateDir: join(root, name),
      allow: [],
      connectionCount,
      env: upgrader === undefined ? {} : { GATE_EXT_UPGRADER: upgrader },
      configFile: { path: join(root, `${name}.yaml`), resources: services.map((s, i) => `${s}=127.0.0.1:${15432 + i}`) },
    });
  const agents = {
    'db-1': start('db-1', 2, 'unit', ['db:orders', 'ssh:db-1']),
    'web-1': start('web-1', 1, 'unit', ['app:grafana']),
    'edge-1': start('edge-1', 1, undefined, ['kube:prod']),
  };
  await agentSaid(agents['db-1'], (text) => (text.match(/tunnel up: /g) ?? []).length >= 2);
  await agentSaid(agents['web-1'], (text) => text.includes('tunnel up: '));
  await agentSaid(agents['edge-1'], (text) => text.includes('tunnel up: '));
  const serverIds: Record<string, string> = {};
  // Bound to the name the agent's certificate carries: the proxy admits no other.
  for (const name of Object.keys(agents)) serverIds[name] = serverIdForName(name);

  // Records reach the store at admission; both proxies answer from it.
  for (const proxy of [p0, p1]) {
    await until(
      async () => {
        const listed = await rows(proxy);
        return listed.length === 3 && listed.find((r) => r.agent === 'db-1')?.proxies.length === 2;
      },
      `proxy${proxy.index + 1} lists three agents, db-1 on both proxies`,
    );
  }
  for (const proxy of [p0, p1]) {
    const listed = await rows(proxy);
    t.same(
      listed.map((r) => r.server_id).sort(),
      Object.values(serverIds).sort(),
      `proxy${proxy.index + 1}: each agent once, by the server ID in its state directory`,
    );
    const byName = new Map(listed.map((r) => [r.agent, r]));
    for (const [name, upgrader, services] of [
      [
        'db-1',
        'unit',
        [
          ['db', 'orders'],
          ['ssh', 'db-1'],
        ],
      ],
      ['web-1', 'unit', [['app', 'grafana']]],
      ['edge-1', 'none', [['kube', 'prod']]],
    ] as Array<[string, string, Array<[string, string]>]>) {
      const row = byName.get(name);
      t.match(
        row,
        {
          server_id: serverIds[name],
          hostname: hostname(),
          services: services.map(([kind, n]) => ({ kind, name: n })),
          version: packageVersion,
          upgrader,
          update_group: 'default',
        },
        `proxy${proxy.index + 1}: ${name}'s fields`,
      );
      t.ok(row && !Number.isNaN(Date.parse(row.since)), 'since is a date');
    }
    t.same(byName.get('db-1')?.proxies, [...ids].sort(), 'the agent with two tunnels is one row naming both proxies');
  }

  // The text table and the flag as the enrollment procedure writes it, from either proxy: by
  // --diag on one, by the proxy's configuration file on the other.
  const config = join(root, 'proxy2.yaml');
  await writeFile(config, await readFile(p1.configFile, 'utf8'));
  const table = await inventory('--diag', `127.0.0.1:${p0.ports.diag}`);
  t.equal(table.code, 0, table.stderr);
  const lines = table.stdout.trimEnd().split('\n');
  t.match(
    lines[0],
    /^Server ID\s+Hostname\s+Services\s+Version\s+Upgrader\s+Group$/,
    "the document's columns, in its order, then the group",
  );
  t.equal(lines.length, 2 + 3, 'a header, a rule and three rows');
  t.match(
    table.stdout,
    new RegExp(`${serverIds['db-1']}\\s+\\S+\\s+db:orders,ssh:db-1\\s+${packageVersion.replace(/\./g, '\\.')}\\s+unit`),
  );
  for (const args of [
    ['--upgrader=none', '--config', config],
    ['--upgrader', 'none', '--diag', `127.0.0.1:${p0.ports.diag}`],
  ]) {
    const none = await inventory(...args);
    t.equal(none.code, 0, none.stderr);
    const dataLines = none.stdout.trimEnd().split('\n').slice(2);
    t.equal(dataLines.length, 1, `${args.join(' ')}: exactly one agent`);
    t.match(dataLines[0], new RegExp(`^${serverIds['edge-1']}\\s+\\S+\\s+kube:prod\\s+\\S+\\s+none\\s+default$`));
  }
  const unitJson = await inventory('--upgrader=unit', '--format', 'json', '--config', config);
  t.same((JSON.parse(unitJson.stdout) as InventoryRow[]).map((r) => r.agent).sort(), ['db-1', 'web-1'], 'JSON, filtered by upgrader');
  const bad = await inventory('--format', 'yaml', '--diag', `127.0.0.1:${p0.ports.diag}`);
  t.equal(bad.code, 2, 'a wrong option is a usage error');

  // /metrics: each proxy counts the agents it holds (db-1 at both).
  const metrics = await Promise.all([p0, p1].map((p) => scrape(p.ports.diag)));
  const sum = (key: string) => metrics.reduce((n, m) => n + m.value(key), 0);
  t.equal(sum(`gate_mux_tunnel_agents_by_version{version="${packageVersion}"}`), 4, 'by version: 3 agents, one of them on both proxies');
  t.equal(sum('gate_mux_tunnel_agents_by_upgrader{upgrader="unit"}'), 3);
  t.equal(sum('gate_mux_tunnel_agents_by_upgrader{upgrader="none"}'), 1);

  // An agent that stops leaves the listing within the TTL (its proxy drops the record at once).
  agents['web-1'].child.kill('SIGTERM');
  await agents['web-1'].exited;
  await until(async () => !(await rows(p1)).some((r) => r.agent === 'web-1'), 'web-1 left the listing', TTL_SECONDS * 1000);

  // SIGKILL of proxy 2: proxy 1 lists the agents that moved to it (and no more proxy 2), once
  // the killed proxy's presence has expired and the agents redialled through HAProxy.
  const killed = once(p1.child, 'exit');
  p1.child.kill('SIGKILL');
  await killed;
  await until(
    async () => {
      const listed = await rows(p0);
      return listed.length === 2 && listed.every((r) => r.proxies.length === 1 && r.proxies[0] === ids[0]);
    },
    'proxy 1 lists db-1 and edge-1, each held by proxy 1 only',
    30_000,
  );
  t.same((await rows(p0)).map((r) => r.agent).sort(), ['db-1', 'edge-1']);
});
