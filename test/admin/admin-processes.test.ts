// The admin command end to end, as an operator runs it, real parts only: redis-server, two
// `gate-mux proxy` processes sharing it (examples/cluster/layout.ts), `gate-mux create/get/rm/
// status/users` against either proxy, on a proxy's host (its configuration and data_dir: full
// permissions) and elsewhere (--proxy and the identity file `users add` wrote, the user's roles
// deciding), and `gate-upgrade export-schedule` writing the window the store holds.
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect as tcpConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startClusterProcesses, type ClusterProxy } from '../helpers/cluster.js';
import { until } from '../helpers/net.js';
import { GATE_MUX } from '../helpers/proxy-command.js';
import { tempDir } from '../helpers/temp-dir.js';
import { encodeProxyHeaderV2Local } from '../../lib/proxy-protocol/header.js';
import { MAINTENANCE_SCHEDULE_PATH } from '../../lib/wire/names.js';

const GATE_UPGRADE = fileURLToPath(new URL('../../lib/cli/gate-upgrade.js', import.meta.url));

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A command with `input` on its stdin, killed after 30 s. */
function run(script: string, args: string[], input = ''): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { PATH: process.env.PATH } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

const gateMux = (args: string[], input?: string): Promise<Ran> => run(GATE_MUX, args, input);
/** On proxy `p`'s host: its configuration (and through it its data_dir). */
const onHost = (p: ClusterProxy): string[] => ['--config', p.configFile];
/** Elsewhere: the cluster's public address (the balancer, which sends PROXY headers) and an identity file. */
const asUser = (balancerPort: number, identity: string): string[] => [
  '--proxy',
  `127.0.0.1:${balancerPort}`,
  '--identity',
  identity,
  '--server-name',
  'localhost',
];

function window(hour: number, days: string): string {
  return `kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: ${hour}\n    weekdays: [${days}]\n`;
}

const READER_ROLE = `kind: role
version: v7
metadata:
  name: maintenance-reader
spec:
  allow:
    rules:
      - resources: [cluster_maintenance_config]
        verbs: [read]
`;

// As the platform's document writes the role that manages the window.
const MAINTAINER_ROLE = `kind: role
version: v7
metadata:
  name: maintenance-admin
spec:
  allow:
    rules:
      - resources: [cluster_maintenance_config]
        verbs: [create, read, update, delete]
`;

t.test('the maintenance window as a cluster resource: create on one proxy, served by both; roles decide who may', async (t) => {
  const cluster = await startClusterProcesses(t, { count: 2, upstreams: {} });
  if (!cluster) return;
  const [p0, p1] = cluster.proxies as [ClusterProxy, ClusterProxy];
  const dir = await tempDir(t, 'admin-e2e');
  const file = (name: string, text: string): Promise<string> => writeFile(join(dir, name), text).then(() => join(dir, name));
  // What proxy `p` itself serves on the schedule endpoint (its port takes PROXY headers: a LOCAL one, as HAProxy's checks send).
  const served = async (p: ClusterProxy): Promise<string> => {
    const tcp = tcpConnect({ host: '127.0.0.1', port: p.ports.web });
    tcp.write(encodeProxyHeaderV2Local());
    const tls = tlsConnect({ socket: tcp, ca: await readFile(cluster.caFile), servername: 'localhost', ALPNProtocols: ['http/1.1'] });
    tls.on('error', () => {});
    await once(tls, 'secureConnect');
    let answer = '';
    tls.on('data', (d: Buffer) => (answer += d.toString()));
    tls.end(`GET ${MAINTENANCE_SCHEDULE_PATH} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    await once(tls, 'close');
    return answer;
  };
  // What the updater writes, through the cluster's public address (the balancer).
  const schedule = async (): Promise<string> => {
    const out = join(dir, 'schedule');
    const r = await run(GATE_UPGRADE, [
      'export-schedule',
      '--proxy',
      `https://127.0.0.1:${cluster.balancerPort}`,
      '--ca',
      cluster.caFile,
      '--server-name',
      'localhost',
      '--schedule',
      out,
    ]);
    if (r.code !== 0) throw new Error(`export-schedule: ${r.stderr}`);
    return readFile(out, 'utf8');
  };

  // No resource yet: each proxy serves its gate.yaml's (none in this layout), and says so.
  t.match(p0.output(), /no maintenance window: neither the cluster store nor this proxy's configuration/);

  const maintenance = await file('maintenance.yaml', window(2, 'Mon, Wed'));
  const created = await gateMux(['create', maintenance, ...onHost(p0)]);
  t.equal(created.code, 0, created.stderr);
  t.match(
    created.stdout,
    /^maintenance window has been updated: 02:00-03:00 UTC on Monday, Wednesday \(revision \d+\)$/m,
    'the confirmation',
  );

  const got = await gateMux(['get', 'cluster_maintenance_config', '--format', 'json', ...onHost(p1)]);
  t.equal(got.code, 0, got.stderr);
  t.match(
    JSON.parse(got.stdout),
    { kind: 'cluster_maintenance_config', spec: { agent_upgrades: { utc_start_hour: 2, weekdays: ['Monday', 'Wednesday'] } } },
    'the other proxy reads it from the store',
  );
  const yaml = await gateMux(['get', 'cluster_maintenance_config/cluster-maintenance-config', ...onHost(p1)]);
  t.match(yaml.stdout, /utc_start_hour: 2/, 'KIND/NAME, YAML by default');

  // Both proxies serve it on the schedule endpoint (each polls the store), and the updater writes it.
  for (const p of [p0, p1]) await until(async () => (await served(p)).includes('utc_start_hour: 2'), `proxy${p.index + 1} serves hour 2`);
  t.match(await schedule(), /utc_start_hour: 2\n\s+weekdays: \[Monday, Wednesday\]/, 'export-schedule writes the stored window');
  t.match(
    p1.output(),
    /maintenance window in force: the cluster's cluster_maintenance_config \(revision \d+\)/,
    'the log says which window is in force',
  );

  const again = await gateMux(['create', maintenance, ...onHost(p1)]);
  t.equal(again.code, 1);
  t.match(again.stderr, /GATE_ERR_RESOURCE_EXISTS: .*already exists: use -f/);
  const overwritten = await gateMux(['create', '-f', '-', ...onHost(p1)], window(5, 'Fri'));
  t.equal(overwritten.code, 0, overwritten.stderr);
  t.match(overwritten.stdout, /maintenance window has been updated: 05:00-06:00 UTC on Friday/, '-f overwrites (from stdin)');
  for (const p of [p0, p1]) await until(async () => (await served(p)).includes('utc_start_hour: 5'), `proxy${p.index + 1} serves hour 5`);

  // Invalid manifests change nothing and list every problem with its key.
  const bad = await gateMux(['create', '-f', await file('bad.yaml', window(24, 'Funday, Mon')), ...onHost(p0)]);
  t.equal(bad.code, 1);
  t.match(bad.stderr, /GATE_ERR_RESOURCE_INVALID/);
  t.match(bad.stderr, /spec\.agent_upgrades\.utc_start_hour: 24 is not an hour 0–23/, 'the hour, by its key');
  t.match(bad.stderr, /spec\.agent_upgrades\.weekdays\[0\]: "Funday" is not a day name/, 'and the day, in the same answer');
  const kindless = await gateMux([
    'create',
    '-f',
    await file('kindless.yaml', 'spec:\n  agent_upgrades:\n    utc_start_hour: 3\n'),
    ...onHost(p0),
  ]);
  t.equal(kindless.code, 1);
  t.match(kindless.stderr, /kind: required/);
  const unchanged = await gateMux(['get', 'cluster_maintenance_config', '--format', 'json', ...onHost(p1)]);
  t.equal(JSON.parse(unchanged.stdout).spec.agent_upgrades.utc_start_hour, 5, 'the stored window is unchanged');

  // status: the cluster's name, version, the CA pin the agents were given, the proxies counted.
  const status = await gateMux(['status', ...onHost(p0)]);
  t.equal(status.code, 0, status.stderr);
  t.match(status.stdout, new RegExp(`^CA pin:\\s+${cluster.caPin}$`, 'm'), 'the CA pin agents join with');
  t.match(status.stdout, /^Proxies:\s+2$/m);
  t.match(status.stdout, /^Agents:\s+0$/m);
  t.match(status.stdout, /^Cluster:\s+localhost$/m);

  // A user with a read-only role: get, but not create -f; roles changed by users update apply at once.
  const roles = await gateMux(['create', '-', ...onHost(p0)], `${READER_ROLE}---\n${MAINTAINER_ROLE}`);
  t.equal(roles.code, 0, roles.stderr);
  t.match(roles.stdout, /role "maintenance-reader" has been created[\s\S]*role "maintenance-admin" has been created/);
  const identity = join(dir, 'alice.pem');
  const added = await gateMux(['users', 'add', 'alice', '--roles', 'maintenance-reader', '--out', identity, ...onHost(p0)]);
  t.equal(added.code, 0, added.stderr);
  t.match(
    await readFile(identity, 'utf8'),
    /BEGIN CERTIFICATE[\s\S]*PRIVATE KEY[\s\S]*BEGIN CERTIFICATE/,
    'the identity file: certificate, key, CA',
  );

  const readable = await gateMux(['get', 'cluster_maintenance_config', ...asUser(cluster.balancerPort, identity)]);
  t.equal(readable.code, 0, readable.stderr);
  t.match(readable.stdout, /utc_start_hour: 5/, 'the reader reads, through the balancer');
  const refused = await gateMux(['create', '-f', maintenance, ...asUser(cluster.balancerPort, identity)]);
  t.equal(refused.code, 1);
  t.match(
    refused.stderr,
    /GATE_ERR_ACCESS_DENIED: user alice may not update cluster_maintenance_config/,
    'refused, naming user, verb, resource',
  );
  t.match(p0.output() + p1.output(), /"code":"GATE_ERR_ACCESS_DENIED"/, 'and logged with its code');

  const updated = await gateMux(['users', 'update', 'alice', '--set-roles', 'maintenance-reader,maintenance-admin', ...onHost(p1)]);
  t.equal(updated.code, 0, updated.stderr);
  const allowed = await gateMux(['create', '-f', maintenance, ...asUser(cluster.balancerPort, identity)]);
  t.equal(allowed.code, 0, allowed.stderr);
  t.match(allowed.stdout, /maintenance window has been updated: 02:00-03:00 UTC/, 'the same identity file, now allowed');
  t.match(
    p0.output() + p1.output(),
    /alice update cluster_maintenance_config\/cluster-maintenance-config: revision \d+/,
    'the change logged: who, what, revision',
  );

  // Renewed before it expires: the same user, a fresh certificate, the file rewritten in place.
  const before = await readFile(identity, 'utf8');
  const renewed = await gateMux(['users', 'renew', ...asUser(cluster.balancerPort, identity)]);
  t.equal(renewed.code, 0, renewed.stderr);
  t.not(await readFile(identity, 'utf8'), before, 'a new certificate and key');
  const afterRenewal = await gateMux(['get', 'cluster_maintenance_config', ...asUser(cluster.balancerPort, identity)]);
  t.equal(afterRenewal.code, 0, afterRenewal.stderr);
  const listed = await gateMux(['get', 'role', '--format', 'json', ...onHost(p1)]);
  t.same(
    (JSON.parse(listed.stdout) as Array<{ metadata: { name: string } }>).map((r) => r.metadata.name),
    ['maintenance-admin', 'maintenance-reader'],
    'a kind without a name lists them',
  );

  const removed = await gateMux(['users', 'rm', 'alice', ...onHost(p0)]);
  t.equal(removed.code, 0, removed.stderr);
  const revoked = await gateMux(['get', 'cluster_maintenance_config', ...asUser(cluster.balancerPort, identity)]);
  t.equal(revoked.code, 1);
  t.match(revoked.stderr, /GATE_ERR_ADMIN_UNAUTHENTICATED: user alice: this identity has been revoked/, 'after users rm, refused');

  // rm: the window goes; each proxy falls back to its configuration's (none here).
  const rm = await gateMux(['rm', 'cluster_maintenance_config/cluster-maintenance-config', ...onHost(p1)]);
  t.equal(rm.code, 0, rm.stderr);
  const gone = await gateMux(['get', 'cluster_maintenance_config', ...onHost(p0)]);
  t.match(gone.stderr, /GATE_ERR_RESOURCE_NOT_FOUND/);
});

t.test('the admin commands refuse a file that is no identity, and --proxy without one, before connecting', async (t) => {
  const dir = await tempDir(t, 'admin-refusals');
  // A certificate without its key (the CA an agent was given) is no identity file.
  const stranger = join(dir, 'stranger.pem');
  const ca = await tempDir(t, 'admin-refusals-ca');
  await writeFile(stranger, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  const notIdentity = await gateMux(['status', '--proxy', '127.0.0.1:9', '--identity', stranger]);
  t.equal(notIdentity.code, 1);
  t.match(notIdentity.stderr, /not an identity file/);
  const noIdentity = await gateMux(['status', '--proxy', '127.0.0.1:9']);
  t.equal(noIdentity.code, 1);
  t.match(noIdentity.stderr, /--proxy needs --identity FILE/);
  const noDataDir = await gateMux(['get', 'role', '--config', join(ca, 'missing.yaml')]);
  t.equal(noDataDir.code, 1, 'a configuration that cannot be read');
});
