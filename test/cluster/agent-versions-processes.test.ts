// Version compatibility end to end, real processes: a `gate-mux proxy` built as 3.1.0 and
// `gate-mux agent`s built as other versions (the package copied with another version in its
// package.json). One major ahead and two behind are refused with GATE_ERR_AGENT_VERSION_INCOMPATIBLE
// and words an operator acts on, and keep retrying; one behind is admitted and listed with its
// version; the version endpoint needs no tunnel (a refused agent's updater still reads it); the
// refused agent replaced by a compatible build in the same state directory is admitted without a
// new token, under the same server ID.
import t from 'tap';
import { get } from 'node:https';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { InventoryRow } from '../../lib/cluster/inventory.js';
import { caPin } from '../../lib/pki/ca-pin.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { spawnAgentProcess, type AgentProcess } from '../helpers/agent-process.js';
import { freePort } from '../helpers/daemon.js';
import { run, until } from '../helpers/net.js';
import { scrape } from '../helpers/prometheus.js';
import { startProxyCommand } from '../helpers/proxy-command.js';
import { tempDir } from '../helpers/temp-dir.js';
import { versionedBuild } from '../helpers/versioned-build.js';

const CODE = 'GATE_ERR_AGENT_VERSION_INCOMPATIBLE';

function httpsText(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, { ca, servername: 'localhost', agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

t.test(
  'agents of other versions against a 3.1.0 proxy: refused ahead and two behind, admitted one behind, back after a compatible build',
  async (t) => {
    const builds = Object.fromEntries(
      await Promise.all(['3.1.0', '4.0.0', '1.4.2', '2.9.0', '3.0.0'].map(async (v) => [v, await versionedBuild(t, v)] as const)),
    ) as Record<string, string>;
    const dir = await tempDir(t, 'agent-versions');
    const diagPort = await freePort('127.0.0.1');
    const config = join(dir, 'gate.yaml');
    await writeFile(
      config,
      `version: v3\ndata_dir: ${join(dir, 'data')}\ndiag_addr: 127.0.0.1:${diagPort}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n`,
    );
    const proxy = await startProxyCommand(t, ['--config', config], dir, { script: builds['3.1.0'] });
    t.match(proxy.output(), 'gate-mux proxy 3.1.0', 'the proxy runs as 3.1.0');
    const address = /listening on (\S+) \(multiplex:/.exec(proxy.output())![1]!;
    const ca = await readFile(join(dir, 'data', 'ca.pem'), 'utf8');
    const token = (await readFile(join(dir, 'data', 'join-token'), 'utf8')).trim();

    const agent = (name: string, version: string, options: { token?: boolean } = {}): AgentProcess =>
      spawnAgentProcess(
        t,
        builds[version]!,
        [
          'agent',
          '--proxy',
          address,
          '--server-name',
          'localhost',
          '--name',
          name,
          '--state-dir',
          join(dir, name),
          ...(options.token === false ? [] : ['--token', token, '--ca-pin', caPin(ca)]),
        ],
        { PATH: process.env.PATH },
      );
    // What the command prints for an operator (its JSON log carries the same words too).
    const refusals = (a: AgentProcess) =>
      a
        .output()
        .split('\n')
        .filter((l) => l.startsWith(`agent: ${CODE}: `));
    const inventory = async (): Promise<InventoryRow[]> => {
      const r = await run(process.execPath, [builds['3.1.0']!, 'inventory', 'ls', '--format', 'json', '--diag', `127.0.0.1:${diagPort}`]);
      if (r.code !== 0) throw new Error(r.stderr);
      return JSON.parse(r.stdout) as InventoryRow[];
    };

    const ahead = agent('ahead', '4.0.0');
    const old = agent('old', '1.4.2');
    const previous = agent('previous', '2.9.0');
    await until(() => refusals(old).length >= 2, 'the 1.4.2 agent refused twice: it keeps retrying', 20_000);
    t.equal(
      refusals(old)[0],
      `agent: ${CODE}: the proxy refused the tunnel: proxy 3.1.0 accepts agents 2.x and 3.x; this agent is 1.4.2: upgrade it`,
    );
    await until(() => refusals(ahead).length >= 1, 'the 4.0.0 agent refused', 20_000);
    t.match(refusals(ahead)[0], /proxy 3\.1\.0 accepts agents 2\.x and 3\.x; this agent is 4\.0\.0: upgrade the proxies first/);
    t.notMatch(old.output(), 'tunnel up', 'never up');
    await until(() => previous.output().includes('tunnel up'), 'the 2.9.0 agent up', 20_000);
    await until(async () => (await inventory()).length === 1, 'one agent listed');
    const listed = await inventory();
    t.same(
      listed.map((r) => [r.agent, r.version]),
      [['previous', '2.9.0']],
      'only the compatible agent is listed, with its version',
    );
    const metrics = await scrape(diagPort);
    t.ok(metrics.value(`gate_mux_tunnel_agents_refused_total{code="${CODE}"}`) >= 3, 'refusals are counted');
    t.equal(metrics.value('gate_mux_tunnel_agents_by_version{version="2.9.0"}'), 1);

    // The updater of a refused agent reads its target version without a tunnel.
    const served = await httpsText(`https://${address}/v1/webapi/automaticupgrades/channel/default/version`, ca);
    t.same(served, { status: 200, body: 'v3.1.0' }, 'the version endpoint answers without a tunnel');

    // The updater installs a compatible build: same state directory, no token.
    const serverId = serverIdForName('old');
    old.child.kill('SIGTERM');
    await old.exited;
    const upgraded = agent('old', '3.0.0', { token: false });
    await until(() => upgraded.output().includes('tunnel up'), 'the upgraded agent up', 20_000);
    t.notMatch(upgraded.output(), 'joined as', 'no new join');
    await until(async () => (await inventory()).length === 2, 'two agents listed');
    const row = (await inventory()).find((r) => r.agent === 'old');
    t.match(row, { server_id: serverId, version: '3.0.0' }, 'the same server ID, the new version');
  },
);
