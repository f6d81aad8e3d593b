// The cluster side of a managed rollout, real parts only: redis-server, two `gate-mux proxy`
// processes behind HAProxy, six `gate-mux agent` processes in three update groups (each reporting
// its version through GATE_MUX_TEST_AGENT_VERSION, the test-only override, as if a package at that
// version were installed), the manifests created with `gate-mux create`, `gate-mux autoupdate
// agents status/rollback` on the proxies' hosts, and GET /v1/webapi/find through the balancer.
// An "update" is the agent restarting at the version find told it. The proxy driving the rollout
// (the lease holder) is killed mid-rollout: the other continues from the stored state without
// picking a new canary; a canary back on the old version halts the rollout by itself (status, a
// GATE_ERR_ROLLOUT_HALTED log line, /metrics); rollback answers the start version again.
// The updater's own end-to-end test (gate-upgrade driving the installs) is the updater's.
import t from 'tap';
import { once } from 'node:events';
import { request } from 'node:https';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { adminCall, adminConnection, type AdminConnection } from '../../lib/cli/admin-client.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { FIND_PATH } from '../../lib/wire/names.js';
import { startClusterAgent, startClusterProcesses, type ClusterAgent, type ClusterProxy, type RunningCluster } from '../helpers/cluster.js';
import { run, until } from '../helpers/net.js';
import { scrape } from '../helpers/prometheus.js';
import { GATE_MUX } from '../helpers/proxy-command.js';
import { tempDir } from '../helpers/temp-dir.js';

const START = '0.1.0';
const TARGET = '0.2.0';
/**
 * The controller steps every tenth of it (3 s) and its lease lasts three steps: each step is a wait
 * of the rollout's, so this sets the test's pace. Room for a canary's restart and the lease's
 * handover (up to three steps) on a loaded machine.
 */
const CANARY_TIMEOUT = '30s';
const GROUPS = { dev: ['dev-1', 'dev-2'], staging: ['stg-1', 'stg-2'], prod: ['prd-1', 'prd-2'] } as const;
type Group = keyof typeof GROUPS;

interface FindBody {
  auto_update: { managed: boolean; agent_version?: string; agent_auto_update?: boolean; reason?: string };
}
interface Status {
  managed: boolean;
  groups: Array<{
    name: string;
    state: string;
    reason: string;
    versions: Record<string, number>;
    canaries: Array<{ server_id: string; status: string; told_at: string }>;
    in_flight: number;
  }>;
}

async function gateMux(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return run(process.execPath, [GATE_MUX, ...args], { timeoutMs: 30_000 });
}

/** GET find through the balancer, as an updater asks it. */
function find(cluster: RunningCluster, ca: Buffer, agent: string, group: string): Promise<FindBody['auto_update']> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: cluster.balancerPort,
        path: `${FIND_PATH}?host=${serverIdForName(agent)}&group=${group}`,
        ca,
        servername: 'localhost',
        agent: false,
        timeout: 10_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d));
        res.on('end', () => {
          try {
            if (res.statusCode !== 200) throw new Error(`find: ${res.statusCode} ${body}`);
            resolve((JSON.parse(body) as FindBody).auto_update);
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('find: timed out')));
    req.end();
  });
}

/** `until`, with a pause between two tries: each try is a TLS handshake on a shared machine. */
async function eventually(condition: () => Promise<boolean>, what: string, limitMs: number): Promise<void> {
  await until(
    async () => {
      if (await condition()) return true;
      await new Promise((r) => setTimeout(r, 250));
      return false;
    },
    what,
    limitMs,
  );
}

// Real processes under a shared machine: two to three minutes (tap's default per file is two).
t.setTimeout(600_000);

t.test('a rollout across three groups on two proxies: canaries, a lease handoff, an automatic halt, a rollback', async (t) => {
  // The groups' window is the current UTC hour: a test started in its last minutes waits for the next.
  const minute = new Date().getUTCMinutes();
  if (minute >= 57) await new Promise((r) => setTimeout(r, (61 - minute) * 60_000 - new Date().getUTCSeconds() * 1000));
  const cluster = await startClusterProcesses(t, { count: 2, upstreams: {} });
  if (!cluster) return;
  const proxies = cluster.proxies as [ClusterProxy, ClusterProxy];
  const ca = await readFile(cluster.caFile);
  const dir = await tempDir(t, 'rollout-e2e');
  const onHost = (p: ClusterProxy): string[] => ['--config', p.configFile];

  const agents = new Map<string, ClusterAgent>();
  const groupOf = (name: string): Group => (Object.keys(GROUPS) as Group[]).find((g) => (GROUPS[g] as readonly string[]).includes(name))!;
  /** (Re)starts agent `name` reporting `version`: what an install of that version and a restart do. */
  const startAgent = async (name: string, version: string, first = false): Promise<void> => {
    const running = agents.get(name);
    if (running && running.child.exitCode === null && running.child.signalCode === null) {
      const exited = once(running.child, 'exit');
      running.child.kill('SIGTERM');
      await exited;
    }
    agents.set(
      name,
      startClusterAgent(t, cluster, {
        name,
        stateDir: join(dir, name),
        allow: [],
        connectionCount: 2,
        token: first,
        env: { GATE_MUX_TEST_AGENT_VERSION: version },
        args: ['--update-group', groupOf(name)],
      }),
    );
  };
  for (const name of Object.values(GROUPS).flat()) await startAgent(name, START, true);

  // The repeated looks (waiting for a state) go the way the CLI's go (adminConnection, adminCall),
  // from this process: a node start per look loaded the shared machine more than the rollout did.
  // The CLI itself is run for one look of each kind (report, status as JSON and as text).
  // One connection (its signed identity) per proxy, renewed well within its five minutes: signing
  // one is an RSA key generation.
  const connections = new Map<ClusterProxy, { at: number; connection: Promise<AdminConnection> }>();
  const admin = async (p: ClusterProxy, operation: string) => {
    let held = connections.get(p);
    if (!held || Date.now() - held.at > 120_000) {
      held = { at: Date.now(), connection: adminConnection({ config: p.configFile }) };
      connections.set(p, held);
    }
    return adminCall(await held.connection, operation);
  };
  const status = async (p: ClusterProxy): Promise<Status> => (await admin(p, 'autoupdate/status')) as unknown as Status;
  const group = async (p: ClusterProxy, name: Group): Promise<Status['groups'][number]> =>
    (await status(p)).groups.find((g) => g.name === name)!;
  type ReportRow = { name: string; group: string; version: string; connected: boolean };
  const report = async (p: ClusterProxy): Promise<ReportRow[]> =>
    ((await admin(p, 'autoupdate/report')) as unknown as { agents: ReportRow[] }).agents;
  const reportCli = async (p: ClusterProxy): Promise<ReportRow[]> => {
    const r = await gateMux(['autoupdate', 'agents', 'report', '--format', 'json', ...onHost(p)]);
    if (r.code !== 0) throw new Error(`report: exit ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as ReportRow[];
  };
  const statusCli = async (p: ClusterProxy): Promise<Status> => {
    const r = await gateMux(['autoupdate', 'agents', 'status', '--format', 'json', ...onHost(p)]);
    if (r.code !== 0) throw new Error(`status: exit ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as Status;
  };
  const nameOf = (serverId: string): string =>
    Object.values(GROUPS)
      .flat()
      .find((n) => serverIdForName(n) === serverId)!;

  await eventually(
    async () => (await report(proxies[0])).filter((r) => r.connected).length === 6,
    'six agents in the inventory',
    30_000,
  ).catch((err: unknown) => {
    for (const p of proxies) t.comment(`proxy${p.index + 1}: ${p.output().slice(-3000)}`);
    for (const [name, a] of agents) t.comment(`${name}: ${a.output().slice(-1000)}`);
    throw err;
  });
  const reported = await reportCli(proxies[1]);
  t.same(
    reported.map((r) => [r.name, r.group, r.version]).sort(),
    Object.values(GROUPS)
      .flat()
      .map((n) => [n, groupOf(n), START])
      .sort(),
    'report: each agent with its group and version, from either proxy',
  );
  t.same(await find(cluster, ca, 'dev-1', 'dev'), { managed: false }, 'no autoupdate_config: unmanaged (the updater follows its channel)');
  const noRollout = await gateMux(['autoupdate', 'agents', 'rollback', ...onHost(proxies[0])]);
  t.equal(noRollout.code, 1);
  t.match(noRollout.stderr, /GATE_ERR_ROLLOUT_COMMAND_REFUSED: no rollout/);

  const hour = new Date().getUTCHours();
  const manifests = `kind: autoupdate_config
version: v1
spec:
  agents:
    mode: enabled
    strategy: halt-on-error
    canary_timeout: ${CANARY_TIMEOUT}
    schedules:
      regular:
        - name: dev
          days: ["*"]
          start_hour: ${hour}
          canary_count: 1
          max_in_flight: 1
        - name: staging
          days: ["*"]
          start_hour: ${hour}
          wait: 5s
          canary_count: 1
        - name: prod
          days: ["*"]
          start_hour: ${hour}
          wait: 5s
          canary_count: 1
---
kind: autoupdate_version
version: v1
spec:
  agents:
    start_version: ${START}
    target_version: ${TARGET}
    mode: enabled
`;
  await writeFile(join(dir, 'rollout.yaml'), manifests);
  const created = await gateMux(['create', join(dir, 'rollout.yaml'), ...onHost(proxies[0])]);
  t.equal(created.code, 0, created.stderr);
  t.match(
    created.stdout,
    /autoupdate_config "autoupdate-config" has been created[\s\S]*autoupdate_version "autoupdate-version" has been created/,
  );

  // dev's canary is told; nobody else.
  await eventually(async () => (await group(proxies[1], 'dev')).state === 'canary', 'dev in canary', 30_000);
  const dev = (await statusCli(proxies[1])).groups.find((g) => g.name === 'dev')!;
  t.equal(dev.canaries.length, 1, 'canary_count 1');
  const canary = nameOf(dev.canaries[0]!.server_id);
  const toldAt = dev.canaries[0]!.told_at;
  const other = GROUPS.dev.find((n) => n !== canary)!;
  t.same(await find(cluster, ca, canary, 'dev'), {
    managed: true,
    agent_version: TARGET,
    agent_auto_update: true,
    reason: `canary of group dev: update to ${TARGET}`,
  });
  t.same(await find(cluster, ca, other, 'dev'), {
    managed: true,
    agent_version: START,
    agent_auto_update: false,
    reason: 'group dev: waiting for its canaries',
  });
  t.same(await find(cluster, ca, 'stg-1', 'staging'), {
    managed: true,
    agent_version: START,
    agent_auto_update: false,
    reason: 'waiting for group dev',
  });

  // The proxy driving the rollout is killed mid-rollout (its canary told, not back yet).
  const driving = /this proxy drives the agents rollout now/;
  await until(() => proxies.some((p) => driving.test(p.output())), 'one proxy holds the lease');
  const holder = proxies.find((p) => driving.test(p.output()))!;
  const survivor = proxies.find((p) => p !== holder)!;
  t.notOk(driving.test(survivor.output()), 'one lease holder at a time');
  const killed = once(holder.child, 'exit');
  holder.child.kill('SIGKILL');
  await killed;
  await startAgent(canary, TARGET);
  await until(() => driving.test(survivor.output()), 'the other proxy takes the lease over', 40_000);
  await eventually(async () => (await group(survivor, 'dev')).state !== 'canary', 'dev leaves canary', 40_000);
  const afterHandoff = await group(survivor, 'dev');
  t.equal(afterHandoff.state, 'active', 'its canary back on the target: dev is active');
  t.same(
    afterHandoff.canaries.map((c) => [nameOf(c.server_id), c.told_at, c.status]),
    [[canary, toldAt, 'back']],
    'the same canary, told once: the new holder continued from the stored state',
  );
  t.same(await find(cluster, ca, other, 'dev'), {
    managed: true,
    agent_version: TARGET,
    agent_auto_update: true,
    reason: `group dev: update to ${TARGET}`,
  });
  await startAgent(other, TARGET);
  await eventually(async () => (await group(survivor, 'dev')).state === 'done', 'dev done', 40_000);
  t.same((await group(survivor, 'dev')).versions, { [TARGET]: 2 }, 'both dev agents on the target');

  // staging's canary comes back on the old version: the rollout halts by itself.
  await eventually(async () => (await group(survivor, 'staging')).state === 'canary', 'staging in canary after its wait', 40_000);
  const stored = async (): Promise<{ groups: Array<{ name: string; changedAt: number; doneAt?: number }> }> => {
    const r = await gateMux(['get', 'autoupdate_agent_rollout', '--format', 'json', ...onHost(survivor)]);
    if (r.code !== 0) throw new Error(`get: exit ${r.code}: ${r.stderr}`);
    return (JSON.parse(r.stdout) as { status: { groups: Array<{ name: string; changedAt: number; doneAt?: number }> } }).status;
  };
  const [devDone, stagingStarted] = (await stored()).groups;
  const gap = stagingStarted!.changedAt - devDone!.doneAt!;
  t.ok(gap >= 5000, `staging started ${gap} ms after dev was done: after its wait (5s)`);
  const staging = await group(survivor, 'staging');
  const stagingCanary = nameOf(staging.canaries[0]!.server_id);
  t.equal((await find(cluster, ca, stagingCanary, 'staging')).agent_version, TARGET);
  await startAgent(stagingCanary, START);
  await eventually(async () => (await group(survivor, 'staging')).state === 'halted', 'staging halted', 40_000);
  const halted = await group(survivor, 'staging');
  t.equal(halted.reason, `canary ${stagingCanary} came back on ${START} (expected ${TARGET})`);
  t.same(
    halted.canaries.map((c) => c.status),
    [`came back on ${START}`],
  );
  t.match(survivor.output(), /GATE_ERR_ROLLOUT_HALTED/, 'a warn line with its code');
  const metrics = await scrape(survivor.ports.diag);
  t.equal(metrics.value('gate_mux_rollout_halted{group="staging"}'), 1, '/metrics: halted');
  t.equal(metrics.value('gate_mux_rollout_halted{group="dev"}'), 0, '/metrics: the other groups are not');
  t.equal(metrics.value('gate_mux_rollout_halts_total{group="staging"}'), 1, '/metrics: one halt counted');
  const stgOther = GROUPS.staging.find((n) => n !== stagingCanary)!;
  t.same(await find(cluster, ca, stgOther, 'staging'), {
    managed: true,
    agent_version: START,
    agent_auto_update: false,
    reason: `halted: canary ${stagingCanary} came back on ${START} (expected ${TARGET})`,
  });
  t.equal((await find(cluster, ca, 'prd-1', 'prod')).agent_auto_update, false, 'prod is never told');
  const text = await gateMux(['autoupdate', 'agents', 'status', ...onHost(survivor)]);
  t.match(text.stdout, new RegExp(`group staging: halted \\(canary ${stagingCanary} came back on 0\\.1\\.0 \\(expected 0\\.2\\.0\\)\\)`));

  // rollback: staging's agents are answered the start version, to install now.
  const rolled = await gateMux(['autoupdate', 'agents', 'rollback', 'staging', ...onHost(survivor)]);
  t.equal(rolled.code, 0, rolled.stderr);
  t.match(rolled.stdout, /rollback: group staging/);
  await until(
    async () => (await find(cluster, ca, stagingCanary, 'staging')).reason === 'rolled back',
    'find answers the rollback',
    10_000,
  );
  t.same(await find(cluster, ca, stagingCanary, 'staging'), {
    managed: true,
    agent_version: START,
    agent_auto_update: true,
    reason: 'rolled back',
  });
  t.equal((await group(survivor, 'staging')).state, 'rolledback');
  t.equal((await group(survivor, 'dev')).state, 'done', 'dev untouched');
  const got = await gateMux(['get', 'autoupdate_agent_rollout', '--format', 'json', ...onHost(survivor)]);
  t.equal(got.code, 0, got.stderr);
  t.match(
    JSON.parse(got.stdout),
    { kind: 'autoupdate_agent_rollout', status: { targetVersion: TARGET } },
    'the state is a resource get reads',
  );
});
