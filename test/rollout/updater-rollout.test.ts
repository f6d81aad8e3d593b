// The whole rollout with the updater doing the installs, real processes only: redis-server, two
// `gate-mux proxy` processes behind HAProxy, six `gate-mux agent` processes in three update groups,
// and beside each agent its own `gate-upgrade run` (the built CLI) on a timer, as the updater
// package's unit runs it. Each agent's "package" is a sh script that stops the agent and starts
// another build of gate-mux (the package copied with another version in its package.json), so the
// version every agent reports is the one its updater installed. 0.1.0 -> 0.2.0: canaries first,
// the rest of a group after them, the next group only after `wait`, status consistent at every
// look, the proxy driving the rollout killed while dev's canary is told (the other continues
// without a second canary). Then 0.3.0, a build that cannot start: the canary's updater finds it
// not ready, reinstalls 0.2.0 and reports the revert; the rollout halts by itself; no other agent
// installs anything; status says why; rollback answers the version the canary had.
import t from 'tap';
import { once } from 'node:events';
import { appendFile, chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { RolloutStatus } from '../../lib/admin/rollout-status.js';
import type { InventoryRow } from '../../lib/cluster/inventory.js';
import { adminCall, adminConnection, type AdminConnection } from '../../lib/cli/admin-client.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { readLastUpdate } from '../../lib/updater/last-update.js';
import { startClusterProcesses, type ClusterProxy } from '../helpers/cluster.js';
import { run, until } from '../helpers/net.js';
import { GATE_MUX } from '../helpers/proxy-command.js';
import { ranOnceThisCiRun } from '../helpers/once-per-ci-run.js';
import { tempDir } from '../helpers/temp-dir.js';
import { versionedBuild } from '../helpers/versioned-build.js';

const GATE_UPGRADE = fileURLToPath(new URL('../../lib/cli/gate-upgrade.js', import.meta.url));
const GROUPS = { dev: ['dev-1', 'dev-2'], staging: ['stg-1', 'stg-2'], prod: ['prd-1', 'prd-2'] } as const;
type Group = keyof typeof GROUPS;
const NAMES = Object.values(GROUPS).flat();
const groupOf = (name: string): Group => (Object.keys(GROUPS) as Group[]).find((g) => (GROUPS[g] as readonly string[]).includes(name))!;
const nameOf = (serverId: string): string => NAMES.find((n) => serverIdForName(n) === serverId)!;
/**
 * Room for an agent's restart on a loaded machine (its node start alone took over 8 s at a load of
 * 15 on 2 cores); the controller steps every tenth of it (6 s), its lease lasts three steps. 30s
 * (steps of 3 s) did not shorten the test measurably (the updaters' runs set its pace) and left
 * less room before the health timeout (40 s) on a loaded machine.
 */
const CANARY_TIMEOUT_S = 60;
/** How long each updater waits for its agent after an install (the same reason). */
const HEALTH_TIMEOUT_S = 40;
const WAIT_S = 5;
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

function manifests(start: string, target: string, hour: number): string {
  const group = (name: string, wait: boolean) =>
    `        - name: ${name}\n          days: ["*"]\n          start_hour: ${hour}\n          canary_count: 1\n${wait ? `          wait: ${WAIT_S}s\n` : ''}`;
  return `kind: autoupdate_config
version: v1
spec:
  agents:
    mode: enabled
    strategy: halt-on-error
    canary_timeout: ${CANARY_TIMEOUT_S}s
    schedules:
      regular:
${group('dev', false)}${group('staging', true)}${group('prod', true)}---
kind: autoupdate_version
version: v1
spec:
  agents:
    start_version: ${start}
    target_version: ${target}
    mode: enabled
`;
}

// Real processes on a machine that may be shared: bounded, but not by two minutes there.
t.setTimeout(600_000);

// The longest file of the suite (some fifty node processes, minutes of a rollout's steps), made of
// parts each tested on every Node major: the controller with real proxies and agents
// (test/admin/rollout-processes), gate-upgrade's run, install, health check and revert against a
// real agent (test/cli/gate-upgrade-rollout, test/cli/gate-upgrade). What it adds is their
// composition, which does not depend on the Node version: once per CI run.
const ranBefore = ranOnceThisCiRun(
  'the composed rollout is not repeated per Node major (its parts are: test/admin/rollout-processes, test/cli/gate-upgrade-rollout)',
);

t.test(
  "a rollout driven by each agent's own gate-upgrade: in order, through a proxy kill, halted by a revert",
  { skip: ranBefore },
  async (t) => {
    // The groups' window is the current UTC hour: a test started in its last minutes waits for the next
    // (to a few seconds past it, not a minute).
    const now = new Date();
    if (now.getUTCMinutes() >= 57) await sleep((60 - now.getUTCMinutes()) * 60_000 - now.getUTCSeconds() * 1000 + 5_000);
    const cluster = await startClusterProcesses(t, { count: 2, upstreams: {} });
    if (!cluster) return;
    const builds = Object.fromEntries(
      await Promise.all(['0.1.0', '0.2.0', '0.3.0'].map(async (v) => [v, await versionedBuild(t, v)] as const)),
    ) as Record<string, string>;
    await writeFile(builds['0.3.0']!, "console.error('gate-mux 0.3.0: cannot start'); process.exit(1);\n");
    const dir = await tempDir(t, 'updater-rollout');
    const t0 = Date.now();
    const elapsed = (): number => (Date.now() - t0) / 1000;

    // Each agent: a directory with its state, its "package" (install.sh VERSION), what is installed,
    // and a log of installs (seconds since the test began, version).
    const agentDir = (name: string) => join(dir, name);
    for (const name of NAMES) {
      const d = agentDir(name);
      await mkdir(d);
      await writeFile(
        join(d, 'install.sh'),
        [
          '#!/bin/sh',
          `echo "$(( $(date +%s%N) / 1000000 - ${t0} )) $1" >> '${d}/installs.log'`,
          'case "$1" in',
          ...Object.entries(builds).map(([v, script]) => `  ${v}) script='${script}' ;;`),
          '  *) echo "no package $1" >&2; exit 1 ;;',
          'esac',
          `if [ -f '${d}/agent.pid' ]; then`,
          `  pid=$(cat '${d}/agent.pid'); kill "$pid" 2>/dev/null; i=0`,
          '  while kill -0 "$pid" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done',
          'fi',
          `echo "$1" > '${d}/installed'`,
          `nohup '${process.execPath}' "$script" agent --proxy 0.0.0.0:${cluster.balancerPort} --server-name localhost --name ${name} --state-dir '${d}/state' --token ${cluster.token} --ca-pin ${cluster.caPin} --update-group ${groupOf(name)} --connection-count 2 >> '${d}/agent.log' 2>&1 < /dev/null &`,
          `echo $! > '${d}/agent.pid'`,
          '',
        ].join('\n'),
      );
      await chmod(join(d, 'install.sh'), 0o755);
      await writeFile(join(d, 'installs.log'), '');
    }
    t.teardown(async () => {
      for (const name of NAMES) {
        const pid = Number(await readFile(join(agentDir(name), 'agent.pid'), 'utf8').catch(() => ''));
        if (pid > 0) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone
          }
        }
      }
    });
    const installs = async (name: string): Promise<Array<{ at: number; version: string }>> =>
      (await readFile(join(agentDir(name), 'installs.log'), 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((l) => ({ at: Number(l.split(' ')[0]) / 1000, version: l.split(' ')[1]! }));

    // The fleet at 0.1.0, installed the way the updater installs (the first start joins).
    await Promise.all(NAMES.map((name) => run(join(agentDir(name), 'install.sh'), ['0.1.0'], { env })));
    const proxies = [...cluster.proxies] as ClusterProxy[];
    let asked: ClusterProxy = proxies[0]!;
    const gateMux = (args: string[]) => run(process.execPath, [GATE_MUX, ...args, '--config', asked.configFile], { timeoutMs: 90_000 });
    // The many looks at status and the inventory go the way the CLI's go (adminConnection, adminCall),
    // from this process: a node start per look, twice a second, loaded the two cores more than the
    // rollout did. The commands that change the rollout, and the last look, run the built CLI.
    // One connection (its signed identity) per proxy, renewed well within its five minutes: signing
    // one is an RSA key generation.
    const connections = new Map<string, { at: number; connection: Promise<AdminConnection> }>();
    const admin = async (operation: string) => {
      let held = connections.get(asked.configFile);
      if (!held || Date.now() - held.at > 120_000) {
        held = { at: Date.now(), connection: adminConnection({ config: asked.configFile }) };
        connections.set(asked.configFile, held);
      }
      return adminCall(await held.connection, operation);
    };
    const status = async (): Promise<RolloutStatus> => (await admin('autoupdate/status')) as unknown as RolloutStatus;
    const statusCli = async (): Promise<RolloutStatus> => {
      const r = await gateMux(['autoupdate', 'agents', 'status', '--format', 'json']);
      if (r.code !== 0) throw new Error(`status: ${r.stderr}`);
      return JSON.parse(r.stdout) as RolloutStatus;
    };
    const group = async (name: Group) => (await status()).groups.find((g) => g.name === name)!;
    const inventory = async (): Promise<InventoryRow[]> => (await admin('inventory')) as unknown as InventoryRow[];
    const inventoryCli = async (): Promise<InventoryRow[]> => {
      const r = await gateMux(['inventory', 'ls', '--format', 'json']);
      if (r.code !== 0) throw new Error(`inventory: ${r.stderr}`);
      return JSON.parse(r.stdout) as InventoryRow[];
    };
    await until(async () => (await inventory()).length === 6, 'six agents in the inventory', 40_000);

    /** `gate-upgrade VERB` for agent `name` of `group`, asking the cluster through its balancer. */
    const updaterArgs = (verb: 'run' | 'dry-run', name: string, group: string): string[] => [
      GATE_UPGRADE,
      verb,
      '--proxy',
      `https://127.0.0.1:${cluster.balancerPort}`,
      '--server-name',
      'localhost',
      '--ca',
      cluster.caFile,
      '--name',
      name,
      '--group',
      group,
    ];

    // Each agent's updater: `gate-upgrade run` every second, as its timer would (bounded: stops at the end).
    let updating = true;
    const runs: Record<string, Array<{ code: number | null; stdout: string; stderr: string }>> = {};
    const updater = async (name: string): Promise<void> => {
      const d = agentDir(name);
      runs[name] = [];
      while (updating) {
        const r = await run(
          process.execPath,
          [
            ...updaterArgs('run', name, groupOf(name)),
            '--state-dir',
            join(d, 'state'),
            '--install-command',
            `${join(d, 'install.sh')} {version}`,
            '--version-command',
            `cat ${join(d, 'installed')}`,
            '--health-timeout',
            String(HEALTH_TIMEOUT_S),
            '--lock',
            join(d, 'lock'),
            '--log-level',
            'silent',
          ],
          // Room for an install, the health check, and a revert with its own check.
          { env, timeoutMs: 150_000 },
        );
        runs[name]!.push(r);
        await appendFile(join(d, 'updater.log'), `${elapsed()} exit ${r.code}\n${r.stdout}${r.stderr}`);
        await sleep(2_000);
      }
    };
    let updaters: Array<Promise<void>> = [];
    t.teardown(async () => {
      updating = false;
      await Promise.all(updaters);
    });

    // Status, looked at all along: a group starts only after the one before it is done.
    const seen: Array<Record<Group, string>> = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        try {
          const s = await status();
          if (s.managed) seen.push(Object.fromEntries(s.groups.map((g) => [g.name, g.state])) as Record<Group, string>);
        } catch {
          // a proxy being killed: the next look asks the survivor
        }
        await sleep(500);
      }
    })();

    const hour = new Date().getUTCHours();
    await writeFile(join(dir, 'v2.yaml'), manifests('0.1.0', '0.2.0', hour));
    const created = await gateMux(['create', join(dir, 'v2.yaml')]);
    t.equal(created.code, 0, created.stderr);
    updaters = NAMES.map(updater);

    // dev's canary is told; the proxy driving the rollout is killed before it is back.
    await until(async () => (await group('dev')).canaries.length === 1, 'dev has its canary', 90_000);
    const firstLook = await group('dev');
    const canary = nameOf(firstLook.canaries[0]!.server_id);
    const toldAt = firstLook.canaries[0]!.told_at;
    const driving = /this proxy drives the agents rollout now/;
    await until(() => proxies.some((p) => driving.test(p.output())), 'one proxy holds the lease');
    const holder = proxies.find((p) => driving.test(p.output()))!;
    const survivor = proxies.find((p) => p !== holder)!;
    asked = survivor;
    const killed = once(holder.child, 'exit');
    holder.child.kill('SIGKILL');
    await killed;

    try {
      await until(async () => (await status()).groups.every((g) => g.state === 'done'), 'every group done on 0.2.0', 300_000);
    } catch (err) {
      // What the rollout and the updaters were doing, for whoever reads the failure.
      t.comment(JSON.stringify(await status().catch(String), null, 1));
      for (const name of NAMES) t.comment(name, (await readFile(join(agentDir(name), 'updater.log'), 'utf8').catch(String)).slice(-1500));
      throw err;
    }
    const done = await status();
    t.same(
      done.groups.map((g) => [g.name, g.versions]),
      [
        ['dev', { '0.2.0': 2 }],
        ['staging', { '0.2.0': 2 }],
        ['prod', { '0.2.0': 2 }],
      ],
      'every agent on 0.2.0',
    );
    t.same(
      (await group('dev')).canaries.map((c) => [nameOf(c.server_id), c.told_at]),
      [[canary, toldAt]],
      'the same canary, told once: the proxy that took over continued from the stored state',
    );
    const at = Object.fromEntries(
      await Promise.all(NAMES.map(async (n) => [n, (await installs(n)).filter((i) => i.version === '0.2.0')] as const)),
    );
    for (const name of NAMES) t.equal(at[name]!.length, 1, `${name} installed 0.2.0 once`);
    const first = (g: Group) => Math.min(...GROUPS[g].map((n) => at[n]![0]!.at));
    const last = (g: Group) => Math.max(...GROUPS[g].map((n) => at[n]![0]!.at));
    const devOther = GROUPS.dev.find((n) => n !== canary)!;
    t.ok(at[canary]![0]!.at < at[devOther]![0]!.at, `dev's canary (${canary}) installed before the rest of dev`);
    t.ok(
      first('staging') - last('dev') >= WAIT_S,
      `staging began ${(first('staging') - last('dev')).toFixed(1)} s after dev's last install (wait ${WAIT_S}s)`,
    );
    t.ok(
      first('prod') - last('staging') >= WAIT_S,
      `prod began ${(first('prod') - last('staging')).toFixed(1)} s after staging's last install`,
    );
    const order = ['unstarted', 'canary', 'active', 'done'];
    const broken = seen.filter((s) => (s.staging !== 'unstarted' && s.dev !== 'done') || (s.prod !== 'unstarted' && s.staging !== 'done'));
    t.same(broken, [], `in ${seen.length} looks at status, no group had started before the one ahead of it was done`);
    for (const g of Object.keys(GROUPS) as Group[]) {
      const states = seen.map((s) => s[g]).filter((s, i, all) => i === 0 || s !== all[i - 1]);
      t.ok(
        states.every((s, i) => i === 0 || order.indexOf(s) > order.indexOf(states[i - 1]!)),
        `${g} only moved forward: ${states.join(' -> ')}`,
      );
    }
    for (const name of NAMES)
      t.match(await readLastUpdate(join(agentDir(name), 'state')), { from: '0.1.0', to: '0.2.0', outcome: 'installed' });

    // 0.3.0 cannot start: its canary's updater reverts it, and the rollout halts on its own.
    const before = Object.fromEntries(await Promise.all(NAMES.map(async (n) => [n, (await installs(n)).length] as const)));
    await writeFile(join(dir, 'v3.yaml'), manifests('0.2.0', '0.3.0', hour));
    const updated = await gateMux(['create', '-f', join(dir, 'v3.yaml')]);
    t.equal(updated.code, 0, updated.stderr);
    await until(async () => (await group('dev')).state === 'halted', 'dev halted', 200_000);
    const halted = await group('dev');
    const badCanary = nameOf(halted.canaries[0]!.server_id);
    // Halted either way the canary failed: back on 0.2.0 (its updater reverted in time), or not back
    // on 0.3.0 within canary_timeout (the revert took longer: a loaded machine).
    t.match(
      halted.reason,
      new RegExp(
        `^canary \\S+ (came back on 0\\.2\\.0 \\(expected 0\\.3\\.0\\)|not back on 0\\.3\\.0 within ${CANARY_TIMEOUT_S}s \\(canary_timeout\\))$`,
      ),
      `status says why: ${halted.reason}`,
    );
    // The outcome is recorded before the reinstall too: wait for the updater's run to end.
    await until(
      () => runs[badCanary]!.some((r) => r.code === 1 && r.stderr.includes('GATE_ERR_UPGRADE_UNHEALTHY')),
      "the canary's updater reverted and failed",
      120_000,
    );
    t.same(
      (await installs(badCanary)).slice(before[badCanary]).map((i) => i.version),
      ['0.3.0', '0.2.0'],
      'the canary installed 0.3.0, then its updater put 0.2.0 back',
    );
    t.match(await readLastUpdate(join(agentDir(badCanary), 'state')), { from: '0.2.0', to: '0.3.0', outcome: 'reverted' });
    t.ok(
      runs[badCanary]!.some((r) => r.code === 1 && r.stderr.includes('GATE_ERR_UPGRADE_UNHEALTHY')),
      "the canary's updater failed with GATE_ERR_UPGRADE_UNHEALTHY",
    );
    await until(
      async () => (await inventory()).find((r) => r.agent === badCanary)?.last_update?.outcome === 'reverted',
      'the inventory shows the revert',
      20_000,
    );
    // Two more rounds of every other updater (each asked, each answered): still nobody else is told.
    const rounds = Object.fromEntries(NAMES.map((n) => [n, runs[n]!.length] as const));
    await until(
      () => NAMES.every((n) => n === badCanary || runs[n]!.length >= rounds[n]! + 2),
      'two more rounds of every updater',
      120_000,
    );
    for (const name of NAMES.filter((n) => n !== badCanary))
      t.equal((await installs(name)).length, before[name], `${name} installed nothing after the halt`);
    t.same(
      (await statusCli()).groups.map((g) => [g.name, g.state]),
      [
        ['dev', 'halted'],
        ['staging', 'unstarted'],
        ['prod', 'unstarted'],
      ],
    );

    // rollback: the canary is answered the version it had, which it runs again already.
    const rolled = await gateMux(['autoupdate', 'agents', 'rollback']);
    t.equal(rolled.code, 0, rolled.stderr);
    await until(async () => (await group('dev')).state === 'rolledback', 'dev rolled back', 20_000);
    const dry = await run(
      process.execPath,
      [...updaterArgs('dry-run', badCanary, 'dev'), '--current', (await readFile(join(agentDir(badCanary), 'installed'), 'utf8')).trim()],
      { env },
    );
    t.equal(dry.code, 0, dry.stderr);
    t.same(
      dry.stdout.split('\n').filter(Boolean).slice(0, 2),
      ['no upgrades available (0.2.0 == 0.2.0)', 'rolled back'],
      'the canary is on the version it had',
    );
    t.equal((await inventoryCli()).find((r) => r.agent === badCanary)?.version, '0.2.0');
    watching = false;
    await watcher;
    t.comment(`the whole rollout took ${elapsed().toFixed(0)} s`);
  },
);
