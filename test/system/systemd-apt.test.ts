// The packages under a real systemd: a booted Debian 12 (test/helpers/booted-debian.ts) with no
// Node.js in it installs gate-mux from a local apt repository signed with a throwaway key (apt
// checks InRelease against the key given by signed-by; no trusted=yes), runs the proxy as
// gate.service (ping, pid file, open-file limit, restart after kill -9, reload of a channel), then
// the platform document's enrollment procedure (Linux agents) as an operator types it: the agent
// configured and started by systemd, reaching the proxy through the HTTPS_PROXY that
// /etc/default/gate sets (a tinyproxy in the container, Debian's package as Debian configures it),
// a client through its tunnel, gate-ent-updater installed with
// its timer enabled, `gate-upgrade dry-run`, an upgrade run by gate-upgrade.service inside the
// maintenance window, the agent back on the new version, `journalctl -u gate-upgrade`, the timer
// suspended and resumed, and the packages erased. Step 5 too: the agent runs as a non-root user
// (a User= drop-in) who owns /etc/gate-upgrade.d/schedule, and the service's run outside the window
// defers (exit 3, which the unit counts as success) before the one inside it installs.
//
// It builds a Debian root and boots a container, so it runs only where CI=true, once per CI run
// (.ci/test-nodes sets GATE_MUX_MACHINE_TESTS=done for the other Node majors); the container and
// everything in it are removed at teardown.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { copyFile, cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bootDebian, type Booted, debianRootTarball, systemTestSkip } from '../helpers/booted-debian.js';
import { run, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { tempDir } from '../helpers/temp-dir.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const V1 = '1.8.0';
const V2 = '1.9.0';
const CA = '/var/lib/gate/proxy/ca.pem';
const WEB = 'https://127.0.0.1:3080';
const NODE = '/usr/lib/gate-mux/node/bin/node';
/**
 * Succeeds once the agent's current run (its unit's invocation) says its tunnel is up. Counting
 * the lines of the whole journal raced: a restart by a package's postinst could log its line after
 * the count was taken, and the test then went on before the restart it made itself had joined.
 */
const AGENT_TUNNEL_UP =
  'journalctl -u gate-agent _SYSTEMD_INVOCATION_ID="$(systemctl show -p InvocationID --value gate-agent)" -o cat --no-pager' +
  " | grep -q 'tunnel up'";
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
/** The name the agent and the updater reach the proxy by: not loopback by name, so HTTPS_PROXY applies. */
const PROXY_NAME = 'gate.test';
/** Debian's tinyproxy in the container, at an address gate-mux takes as a proxy host. */
const HTTPS_PROXY = 'http://127.0.0.2:8888';

const why = systemTestSkip();

t.setTimeout(900_000);

t.test('apt, systemd and the enrollment procedure in a booted Debian 12 without Node.js', { skip: why }, async (t) => {
  for (const [binary, pkg] of [
    ['mmdebstrap', 'mmdebstrap'],
    ['systemd-nspawn', 'systemd-container'],
    ['nsenter', 'util-linux'],
    ['apt-ftparchive', 'apt-utils'],
    ['gpg', 'gpg'],
  ] as const) {
    if (!requirePeer(t, binary, pkg)) return;
  }
  const work = await tempDir(t, 'systemd-apt');
  const started = Date.now();
  const phase = (what: string) => t.comment(`${((Date.now() - started) / 1000).toFixed(0)} s: ${what}`);
  const arch = (await run('dpkg', ['--print-architecture'])).stdout.trim();

  // The root while both versions are built: the one systemd-rpm.test.ts boots too (with dnf and
  // zypper, which apt never touches), so a CI run makes one root, not two. tinyproxy: the
  // agent's HTTPS_PROXY.
  const rootTarball = debianRootTarball(t, ['dnf', 'zypper', 'tinyproxy']);
  const packages = join(work, 'packages');
  for (const version of [V1, V2]) {
    // The .debs only (`npm run package` also makes RPMs), this machine's architecture, unpacked.
    // env -u: without tap's loader hooks in NODE_OPTIONS (tsc fails under them).
    const built = await run('env', ['-u', 'NODE_OPTIONS', 'bash', join(REPO_ROOT, 'packaging/build-debs')], {
      env: {
        ...process.env,
        GATE_PACKAGE_VERSION: version,
        GATE_PACKAGE_DIR: packages,
        GATE_PACKAGE_ARCHES: arch,
        GATE_PACKAGE_COMPRESSION: 'none',
      },
      timeoutMs: 300_000,
    });
    t.equal(built.code, 0, `build-debs at ${version}: ${built.stderr.slice(-2000)}`);
  }

  // A throwaway signing key, and the repository an operator would publish (packaging/build-repos).
  const gnupg = join(work, 'gnupg');
  await mkdir(gnupg, { mode: 0o700 });
  const gpgEnv = { ...process.env, GNUPGHOME: gnupg };
  const keyMade = await run(
    'gpg',
    ['--batch', '--passphrase', '', '--quick-gen-key', 'gate-mux test <test@example.invalid>', 'ed25519', 'sign', '1d'],
    {
      env: gpgEnv,
    },
  );
  t.equal(keyMade.code, 0, keyMade.stderr);
  const fingerprint = /^fpr:+([0-9A-F]{40}):/m.exec(
    (await run('gpg', ['--batch', '--with-colons', '--list-keys'], { env: gpgEnv })).stdout,
  )![1]!;
  const repos = join(work, 'repos');
  const published = await run('bash', [join(REPO_ROOT, 'packaging/build-repos')], {
    env: { ...gpgEnv, GATE_PACKAGE_DIR: packages, GATE_REPO_DIR: repos, GATE_PACKAGE_KEY: fingerprint },
    timeoutMs: 120_000,
  });
  t.equal(published.code, 0, published.stderr);
  const aptRepo = join(repos, 'apt');
  t.match(await readFile(join(aptRepo, 'InRelease'), 'utf8'), /^-----BEGIN PGP SIGNED MESSAGE-----/, 'InRelease is signed');

  phase('packages built and published');
  const box = await bootDebian(t, await rootTarball, async (root) => {
    await cp(aptRepo, join(root, 'srv/gate-apt'), { recursive: true });
    await run('chmod', ['-R', 'a+rX', join(root, 'srv/gate-apt')]);
    await copyFile(join(aptRepo, 'gate-mux.gpg'), join(root, 'usr/share/keyrings/gate-mux.gpg'));
    await writeFile(
      join(root, 'etc/apt/sources.list.d/gate-mux.list'),
      'deb [signed-by=/usr/share/keyrings/gate-mux.gpg] file:/srv/gate-apt ./\n',
    );
    // The name the agent dials the proxy by (see HTTPS_PROXY below), which tinyproxy resolves
    // here. (A minbase root has no /etc/hosts: this one is as Debian's installer writes it, plus that name.)
    await writeFile(join(root, 'etc/hosts'), `127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n127.0.0.1 ${PROXY_NAME}\n`);
  });
  const apt = (args: string) => box.sh(`apt-get ${args}`, { env: { DEBIAN_FRONTEND: 'noninteractive' }, timeoutMs: 300_000 });

  phase('container booted');
  t.equal((await box.exec('command -v node nodejs')).stdout, '', 'no Node.js in the container');

  // apt checks the signature: without the key the repository is refused.
  await box.sh('mv /usr/share/keyrings/gate-mux.gpg /root/gate-mux.gpg');
  const unsigned = await box.exec('apt-get update', { timeoutMs: 120_000 });
  t.match(`${unsigned.stdout}${unsigned.stderr}`, /NO_PUBKEY|not signed|public key is not available/, 'no key, no repository');
  await box.sh('mv /root/gate-mux.gpg /usr/share/keyrings/gate-mux.gpg');
  const updated = await apt('update');
  t.match(updated, /file:\/srv\/gate-apt \.\/ InRelease/, 'apt reads the signed InRelease');

  // --- the proxy under systemd ---------------------------------------------------------------
  await apt(`install -y -q gate-mux=${V1}`);
  const version = (await box.sh('gate-mux --version')).split('\n');
  t.same(version.slice(0, 2), [V1, `Node.js v${pinnedRuntime()} (${NODE})`], "gate-mux --version: the package's version and runtime");
  await writeGateYaml(box, V1);
  await box.sh('systemctl enable --now gate');
  const ping = await untilOk(box, `curl -sS --cacert ${CA} ${WEB}/webapi/ping`, 'the proxy answers /webapi/ping');
  t.equal(JSON.parse(ping).proxy.tls_routing_enabled, true, '/webapi/ping answers');
  const mainPid = async (unit: string) => Number((await box.sh(`systemctl show -p MainPID --value ${unit}`)).trim());
  const pid = await mainPid('gate');
  t.equal(Number((await box.sh('cat /run/gate.pid')).trim()), pid, '/run/gate.pid names the main process');
  // LimitNOFILE=524288 reaches the process, up to the ceiling the container's systemd was given
  // (a machine without CAP_SYS_RESOURCE cannot raise it: then systemd applies that ceiling).
  t.equal((await box.sh('systemctl show -p LimitNOFILE --value gate')).trim(), '524288');
  const ceiling = Number(/^Max open files\s+\d+\s+(\d+)/m.exec(await readFile(`/proc/${box.pid}/limits`, 'utf8'))![1]);
  const limits = await box.sh(`cat /proc/${pid}/limits`);
  const [soft, hard] = /^Max open files\s+(\d+)\s+(\d+)/m.exec(limits)!.slice(1).map(Number);
  t.same(
    [soft, hard],
    [Math.min(524288, ceiling), Math.min(524288, ceiling)],
    `open-file limit of the proxy (container ceiling ${ceiling})`,
  );
  if (ceiling < 524288) t.comment(`this machine caps open files at ${ceiling}: the unit's 524288 was applied as ${soft}`);

  // Restart=always: kill -9 and systemd starts it again (RestartSec=5).
  await box.sh(`kill -9 ${pid}`);
  await until(async () => (await mainPid('gate')) > 0 && (await mainPid('gate')) !== pid, 'systemd restarts the proxy', 30_000);
  await untilOk(box, `curl -sS --cacert ${CA} ${WEB}/webapi/ping`, 'the restarted proxy answers');
  t.equal((await box.sh('systemctl show -p NRestarts --value gate')).trim(), '1', 'restarted once');
  t.equal(Number((await box.sh('cat /run/gate.pid')).trim()), await mainPid('gate'), 'the pid file names the new process');

  phase('proxy checked');
  // --- enrollment (Linux agents) -------------------------------------------------------------
  // The resource behind the agent: a TCP server that names itself, as a transient unit.
  await box.sh(
    `systemd-run --unit=tagged-target ${NODE} -e "require('net').createServer((s) => s.end('enrolled-target\\\\n')).listen(7000, '127.0.0.1')"`,
  );
  // Step 2: the channel's version, leading v removed.
  const target = (await box.sh(`curl -sS --cacert ${CA} ${WEB}/v1/webapi/automaticupgrades/channel/stable/cloud/version`))
    .trim()
    .replace(/^v/, '');
  t.equal(target, V1);
  // Step 3 (gate-mux is installed at that version above) and 4.
  t.equal((await box.sh("dpkg-query -W -f='${Version}' gate-mux")).trim(), target, 'step 4: the installed version is the target');
  // The agent's file, from what the proxy prints at start (CA pin) and its development token.
  const proxyLog = await box.sh('journalctl -u gate -o cat --no-pager');
  const pin = /agents: CA pin (sha256:[0-9a-f]{64})/.exec(proxyLog)![1]!;
  t.match(proxyLog, /^\s+gate-mux agent --proxy localhost:3080 /m, 'the join hint names the installed command, not a node');
  // HTTPS_PROXY in /etc/default/gate: the agent (and later the updater) reach the proxy through
  // the container's tinyproxy. Debian's tinyproxy.conf as shipped: port 8888, clients from
  // 127.0.0.1, CONNECT to any port. Its log goes to the journal: the root's /var/log/tinyproxy is
  // root's, so tinyproxy (running as its user) falls back to syslog. gate-mux dials loopback
  // addresses and localhost directly whatever HTTPS_PROXY says, and takes neither as a proxy
  // host, so the proxy is dialled by a name (PROXY_NAME, 127.0.0.1 in /etc/hosts) through
  // tinyproxy at 127.0.0.2 (the connection still comes from 127.0.0.1).
  await box.sh('systemctl enable --now tinyproxy');
  await box.sh(`echo HTTPS_PROXY=${HTTPS_PROXY} >> /etc/default/gate`);
  await box.sh(
    `gate-mux agent configure --proxy ${PROXY_NAME}:3080 --server-name localhost --token "$(cat /var/lib/gate/proxy/join-token)" --ca-pin ${pin} --name node-1 --allow 127.0.0.1:7000 --upgrade-channel stable/cloud --package-manager apt`,
  );
  await box.sh('systemctl enable --now gate-agent');
  await untilOk(box, AGENT_TUNNEL_UP, 'the agent holds its tunnel');
  const tinyproxyLog = () => box.sh('journalctl -u tinyproxy -o cat --no-pager');
  const connects = () => tinyproxyLog().then((log) => log.split(`CONNECT ${PROXY_NAME}:3080 `).length - 1);
  t.match(
    await tinyproxyLog(),
    new RegExp(`CONNECT ${PROXY_NAME}:3080 HTTP/1\\.1`),
    "tinyproxy's log: the agent's CONNECT to the proxy's port",
  );
  t.match(await tinyproxyLog(), new RegExp(`Established connection to host "${PROXY_NAME}"`), 'and the tunnel it opened');
  await throughTinyproxy(t, box, 'the agent');
  t.equal(await throughTunnel(box), 'enrolled-target', 'a client reaches the resource through the agent under systemd');

  await apt('install -y -q gate-ent-updater');
  t.equal((await box.exec('systemctl is-enabled gate-upgrade.timer')).stdout.trim(), 'enabled', 'gate-ent-updater enables the timer');
  t.equal((await box.exec('systemctl is-active gate-upgrade.timer')).stdout.trim(), 'active', 'and starts it');
  t.match(await box.sh('systemctl show -p Environment --value gate-agent'), /GATE_EXT_UPGRADER=unit/, 'the agent reports its upgrader');
  // Step 5: the agent runs as a non-root user (a User= drop-in), who owns its files and the
  // schedule file; the updater's service (root) writes that file and the user keeps it.
  await box.sh('useradd --system --no-create-home --shell /usr/sbin/nologin gate-agent');
  await box.sh('chown gate-agent /etc/gate/agent.yaml /var/lib/gate && chown -R gate-agent /var/lib/gate/agent');
  await box.sh('touch /etc/gate-upgrade.d/schedule && chown gate-agent /etc/gate-upgrade.d/schedule');
  await mkdir(join(box.root, 'etc/systemd/system/gate-agent.service.d'), { recursive: true });
  await writeFile(join(box.root, 'etc/systemd/system/gate-agent.service.d/user.conf'), '[Service]\nUser=gate-agent\n');
  await box.sh('systemctl daemon-reload && systemctl restart gate-agent');
  await untilOk(box, AGENT_TUNNEL_UP, 'the non-root agent holds its tunnel');
  t.equal(
    (await box.sh('ps -o user= -p "$(systemctl show -p MainPID --value gate-agent)"')).trim(),
    'gate-agent',
    'the agent runs as gate-agent',
  );
  t.equal(await throughTunnel(box), 'enrolled-target', 'and carries traffic');

  // Step 6: dry-run, no flags.
  const dry = await box.exec('gate-upgrade dry-run');
  t.equal(dry.code, 0, `gate-upgrade dry-run: ${dry.stderr}`);
  t.equal(dry.stdout.split('\n')[0], `no upgrades available (${V1} == ${V1})`);
  t.match(
    dry.stderr,
    /no (valid )?maintenance schedule has been exported yet/,
    "the document's expected warning before the schedule is exported",
  );

  // The cluster moves the channel: the proxy's file changes and `systemctl reload gate` serves it,
  // in the same process.
  const before = await mainPid('gate');
  await writeGateYaml(box, V2);
  await box.sh('systemctl reload gate');
  await untilOk(
    box,
    `curl -sS --cacert ${CA} ${WEB}/v1/webapi/automaticupgrades/channel/stable/cloud/version | grep -qx v${V2}`,
    'the reloaded proxy serves the new version',
  );
  t.equal(await mainPid('gate'), before, 'reloaded, not restarted');
  t.equal((await box.sh('gate-upgrade dry-run')).split('\n')[0], `an upgrade is available (${V1} -> ${V2})`);

  // Outside the window (tomorrow's day) the timer's own service defers: exit 3, a success to systemd.
  await writeGateYaml(box, V2, 1);
  await box.sh('systemctl reload gate');
  const connectsBefore = await connects();
  const deferred = await box.exec('systemctl start gate-upgrade.service', { timeoutMs: 300_000 });
  t.equal(deferred.code, 0, `a deferred run is not a failure: ${deferred.stderr}`);
  // Its requests (the schedule, the channel) went through HTTPS_PROXY as well.
  t.ok((await connects()) > connectsBefore, "the updater's service reached the proxy through tinyproxy");
  t.equal((await box.sh('systemctl show -p ExecMainStatus --value gate-upgrade')).trim(), '3', 'it exited 3: deferred');
  t.equal((await box.sh("dpkg-query -W -f='${Version}' gate-mux")).trim(), V1, 'nothing installed outside the window');
  t.equal((await box.sh('stat -c %U /etc/gate-upgrade.d/schedule')).trim(), 'gate-agent', "the schedule is still the agent user's");

  // Inside it the service installs (the schedule first, then the install). The window opens this
  // hour (past :59:30, the next one, so that the run falls inside it).
  const now = new Date();
  if (now.getUTCMinutes() === 59 && now.getUTCSeconds() >= 30) await new Promise((r) => setTimeout(r, (61 - now.getUTCSeconds()) * 1000));
  await writeGateYaml(box, V2);
  await box.sh('systemctl reload gate');
  phase('enrolled; upgrading');
  const agentBefore = await mainPid('gate-agent');
  const ran = await box.exec('systemctl start gate-upgrade.service', { timeoutMs: 300_000 });
  t.equal(ran.code, 0, `gate-upgrade.service: ${ran.stderr}\n${(await box.exec('journalctl -u gate-upgrade -o cat --no-pager')).stdout}`);
  t.equal((await box.sh("dpkg-query -W -f='${Version}' gate-mux")).trim(), V2, 'the package is at the new version');
  t.equal((await box.sh('gate-mux --version')).split('\n')[0], V2);
  const journal = await box.sh('journalctl -u gate-upgrade -o cat --no-pager');
  t.match(
    journal,
    new RegExp(`upgraded ${V1.replaceAll('.', '\\.')} -> ${V2.replaceAll('.', '\\.')}`),
    'journalctl -u gate-upgrade shows the decision',
  );
  t.match(journal, /wrote the maintenance schedule/, 'the service exported the schedule first');
  t.not(await mainPid('gate-agent'), agentBefore, 'the agent was restarted on the new version');
  await untilOk(box, AGENT_TUNNEL_UP, 'the agent re-joins');
  t.equal((await box.sh('ps -o user= -p "$(systemctl show -p MainPID --value gate-agent)"')).trim(), 'gate-agent', 'still as gate-agent');
  t.equal(await throughTunnel(box), 'enrolled-target', 'traffic flows through the upgraded agent');
  await throughTinyproxy(t, box, 'the upgraded agent, as gate-agent,');
  t.equal((await box.sh('gate-upgrade dry-run')).split('\n')[0], `no upgrades available (${V2} == ${V2})`);

  // Suspending and resuming automatic updates, as the document writes it.
  await box.sh('systemctl disable --now gate-upgrade.timer');
  t.equal((await box.exec('systemctl is-enabled gate-upgrade.timer')).stdout.trim(), 'disabled');
  t.equal((await box.exec('systemctl is-active gate-upgrade.timer')).stdout.trim(), 'inactive', 'suspended: no further runs');
  await box.sh('systemctl enable --now gate-upgrade.timer');
  t.equal((await box.exec('systemctl is-active gate-upgrade.timer')).stdout.trim(), 'active', 'resumed');
  t.match(await box.sh('systemctl list-timers --all --no-pager gate-upgrade.timer'), /gate-upgrade\.timer/);

  // Erase: the services stop, the units go, the operator's files stay.
  await apt('purge -y -q gate-ent-updater gate-mux');
  for (const unit of ['gate', 'gate-agent', 'gate-upgrade.timer'])
    t.not((await box.exec(`systemctl is-active ${unit}`)).stdout.trim(), 'active', `${unit} stopped on erase`);
  t.equal((await box.exec('test -e /lib/systemd/system/gate.service')).code, 1, 'the units are gone');
  t.equal((await box.exec('test -e /etc/gate/gate.yaml')).code, 0, "the operator's gate.yaml stays");
  phase('erased');
});

/** The proxy's file: the channel at `version`, a window open this hour `dayOffset` days from today, a tunnelled upstream. */
async function writeGateYaml(box: Booted, version: string, dayOffset = 0): Promise<void> {
  const now = new Date();
  await writeFile(
    join(box.root, 'etc/gate/gate.yaml'),
    [
      'version: v3',
      'data_dir: /var/lib/gate/proxy',
      'auth_service:',
      '  proxy_listener_mode: multiplex',
      'proxy_service:',
      '  web_listen_addr: 127.0.0.1:3080',
      '  public_addr: localhost:3080',
      '  upstreams:',
      '    redis: tunnel:node-1/127.0.0.1:7000',
      '  automatic_upgrades_channels:',
      '    stable/cloud:',
      `      static_version: v${version}`,
      '  cluster_maintenance_config:',
      '    agent_upgrades:',
      `      utc_start_hour: ${now.getUTCHours()}`,
      `      weekdays: [${DAYS[(now.getUTCDay() + dayOffset) % 7]}]`,
      '',
    ].join('\n'),
  );
}

/** A TLS client inside the container (the package's runtime) on the redis route: what it reads. */
async function throughTunnel(box: Booted): Promise<string> {
  const script = [
    "const s = require('tls').connect({ host: '127.0.0.1', port: 3080, servername: 'localhost',",
    `  ca: require('fs').readFileSync('${CA}'), ALPNProtocols: ['gate-redis'] });`,
    "let got = ''; s.on('data', (d) => { got += d; if (got.includes('\\n')) { process.stdout.write(got); s.destroy(); } });",
    "s.on('error', (e) => { console.error(e.message); process.exit(1); });",
  ].join('\n');
  await writeFile(join(box.root, 'root/through-tunnel.cjs'), script);
  return (await box.sh(`${NODE} /root/through-tunnel.cjs`, { timeoutMs: 30_000 })).trim();
}

/** The agent's connections: to tinyproxy, and none to the proxy's port directly. */
async function throughTinyproxy(t: Test, box: Booted, who: string): Promise<void> {
  const peers = await agentPeers(box);
  t.ok(peers.includes(new URL(HTTPS_PROXY).host), `${who} is connected to tinyproxy (${peers.join(', ')})`);
  t.notOk(
    peers.some((peer) => peer.endsWith(':3080')),
    `${who} has no connection of its own to the proxy's port`,
  );
}

/**
 * Where the agent's TCP connections go (host:port), read from the container's /proc/net/tcp by
 * the socket inodes of its main process's descriptors (minbase has no ss).
 */
async function agentPeers(box: Booted): Promise<string[]> {
  const table = await box.sh(
    'pid=$(systemctl show -p MainPID --value gate-agent); ' +
      "for inode in $(ls -l /proc/$pid/fd | sed -n 's/.*socket:\\[\\([0-9]*\\)\\]$/\\1/p'); do " +
      'awk -v i="$inode" \'$10 == i && $4 == "01" { print $3 }\' /proc/net/tcp; done',
  );
  const peers = table
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((hexPeer) => {
      const [ip, port] = hexPeer.split(':') as [string, string];
      const octets = [0, 2, 4, 6].map((i) => Number.parseInt(ip.slice(i, i + 2), 16)).reverse();
      return `${octets.join('.')}:${Number.parseInt(port, 16)}`;
    });
  return [...new Set(peers)].sort();
}

/** Retries `command` inside the container until it exits 0 (up to 60 s); its stdout. */
async function untilOk(box: Booted, command: string, what: string): Promise<string> {
  let out = '';
  await until(
    async () => {
      const r = await box.exec(command, { timeoutMs: 20_000 });
      out = r.stdout;
      if (r.code !== 0) await new Promise((resolve) => setTimeout(resolve, 250));
      return r.code === 0;
    },
    what,
    60_000,
  );
  return out;
}

function pinnedRuntime(): string {
  return /^NODE_RUNTIME_VERSION=(.+)$/m.exec(readFileSync(join(REPO_ROOT, 'packaging/node-runtime'), 'utf8'))![1]!;
}
