import t, { type Test } from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, parseConfig } from '../../lib/config/load.js';
import type { GateConfig } from '../../lib/config/types.js';
import { ErrorCodes, isGateError } from '../../lib/errors.js';
import { DEFAULT_JOIN_LIMITS } from '../../lib/vocabulary/join-limits.js';

interface ValidCase {
  name: string;
  yaml: string;
  check: (config: GateConfig, warnings: string[], t: Test) => void;
}
interface InvalidCase {
  name: string;
  yaml: string;
  /** Key path the error must name. */
  path: string;
  /** What the message must say was expected (or wrong). */
  says: RegExp;
  line?: number;
}

const valid: ValidCase[] = [
  {
    name: 'empty file: multiplex on 0.0.0.0:3080, nothing routed',
    yaml: '',
    check: (c, w, t) => {
      t.equal(c.listenerMode, 'multiplex');
      t.same(c.proxy.webListenAddr, { host: '0.0.0.0', port: 3080 });
      t.same(c.proxy.upstreams, {});
      t.equal(c.proxy.detectTimeoutMs, 10_000);
      t.equal(c.proxy.proxyProtocol, 'off');
      t.same(w, []);
    },
  },
  {
    name: 'version v3, data_dir and empty sections',
    yaml: 'version: v3\ndata_dir: /var/lib/gate\nauth_service:\nproxy_service:\n',
    check: (c, _w, t) => {
      t.equal(c.version, 'v3');
      t.equal(c.dataDir, '/var/lib/gate');
    },
  },
  {
    name: 'separate mode with explicit ports',
    yaml: `auth_service: {proxy_listener_mode: separate}
proxy_service:
  web_listen_addr: :443
  listen_addr: 0.0.0.0:2222
  upstreams: {ssh: "127.0.0.1:22"}
`,
    check: (c, w, t) => {
      t.equal(c.listenerMode, 'separate');
      t.same(c.proxy.webListenAddr, { host: '0.0.0.0', port: 443 });
      t.same(c.proxy.listenAddrs.ssh, { host: '0.0.0.0', port: 2222 });
      t.same(w, []);
    },
  },
  {
    name: 'public_addr as a string takes the web port',
    yaml: 'proxy_service:\n  web_listen_addr: 127.0.0.1:3443\n  public_addr: gate.example.com\n',
    check: (c, w, t) => {
      t.same(c.proxy.publicAddrs, [{ host: 'gate.example.com', port: 3443 }]);
      t.same(w, []);
    },
  },
  {
    name: 'more than one public_addr is a warning naming the key',
    yaml: 'proxy_service:\n  public_addr: [a.example.com:443, "10.0.0.5"]\n',
    check: (c, w, t) => {
      t.same(c.proxy.publicAddrs, [
        { host: 'a.example.com', port: 443 },
        { host: '10.0.0.5', port: 3080 },
      ]);
      t.equal(w.length, 1);
      t.match(w[0], /proxy_service\.public_addr: 2 addresses given; clients are sent to the first \(a\.example\.com:443\)/);
      t.match(w[0], /^<config>:2: /, 'warning carries its line');
    },
  },
  {
    name: 'separate-mode public addresses default to legacy ports',
    yaml: `auth_service: {proxy_listener_mode: separate}
proxy_service:
  ssh_public_addr: ssh.example.com
  tunnel_public_addr: tun.example.com
  kube_public_addr: kube.example.com
  mysql_public_addr: "[2001:db8::2]"
  postgres_public_addr: pg.example.com:15432
`,
    check: (c, _w, t) => {
      t.same(c.proxy.sshPublicAddrs, [{ host: 'ssh.example.com', port: 3023 }]);
      t.same(c.proxy.tunnelPublicAddrs, [{ host: 'tun.example.com', port: 3024 }]);
      t.same(c.proxy.kubePublicAddrs, [{ host: 'kube.example.com', port: 3026 }]);
      t.same(c.proxy.mysqlPublicAddrs, [{ host: '2001:db8::2', port: 3036 }]);
      t.same(c.proxy.postgresPublicAddrs, [{ host: 'pg.example.com', port: 15432 }]);
    },
  },
  {
    name: 'every upstream, IPv6 included, and ones behind agents',
    yaml: `proxy_service:
  upstreams:
    ssh: 127.0.0.1:22
    kube: kube.internal:6443
    postgres: "[::1]:5432"
    mysql: tunnel:db-agent/10.0.0.5:3306
    mongodb: 127.0.0.1:27017
    redis: " tunnel:cache.edge/[::1]:6379 "
`,
    check: (c, _w, t) => {
      t.equal(Object.keys(c.proxy.upstreams).length, 6);
      t.same(c.proxy.upstreams.postgres, { host: '::1', port: 5432 });
      t.same(c.proxy.upstreams.kube, { host: 'kube.internal', port: 6443 });
      t.same(c.proxy.upstreams.mysql, { agent: 'db-agent', target: '10.0.0.5:3306' });
      t.same(c.proxy.upstreams.redis, { agent: 'cache.edge', target: '[::1]:6379' });
      t.same(
        c.agents,
        { joinTokens: [], developmentToken: true, certificateTtlMs: 3_600_000, revokedSerials: [], limits: DEFAULT_JOIN_LIMITS },
        'agent defaults: no static token (so the development token), 1 h certificates, the default join limits',
      );
    },
  },
  {
    name: 'join tokens, certificate lifetime and revocations',
    yaml: `auth_service:
  join_tokens:
    - token: 0123456789abcdef-static
      agents: [db-agent, cache]
      expires: 2030-01-01T00:00:00Z
      max_uses: 3
    - token: "another-token-of-16+"
      agents: solo
  agent_certificate_ttl: 10m
  revoked_agent_certificates: ["0A:1B:2c", "00ff"]
  join_rate_limit: {burst: 50, per_minute: 30}
  renew_rate_limit: {per_minute: 0}
  join_body_timeout: 800ms
`,
    check: (c, _w, t) => {
      t.same(c.agents, {
        joinTokens: [
          { token: '0123456789abcdef-static', agents: ['db-agent', 'cache'], expiresAt: Date.parse('2030-01-01T00:00:00Z'), maxUses: 3 },
          { token: 'another-token-of-16+', agents: ['solo'], expiresAt: undefined, maxUses: undefined },
        ],
        developmentToken: false,
        certificateTtlMs: 600_000,
        revokedSerials: ['a1b2c', 'ff'],
        limits: { join: { burst: 50, perMinute: 30 }, renew: { burst: 1000, perMinute: 0 }, bodyTimeoutMs: 800 },
      });
    },
  },
  {
    name: 'channels: static (v added) and forward (trailing slash dropped), slashes in names',
    yaml: `proxy_service:
  automatic_upgrades_channels:
    stable/cloud: {static_version: 1.2.3}
    edge: {static_version: v2.0.0-rc.1+build.5}
    default: {static_version: v9.9.9}
    stable/rolling: {forward_url: "https://updates.example.com/v1/stable/rolling/"}
    lab: {forward_url: "http://updates.lab.internal/v1", allow_insecure_forward_url: true}
`,
    check: (c, _w, t) => {
      t.same(c.proxy.automaticUpgradesChannels, {
        'stable/cloud': { kind: 'static', version: 'v1.2.3' },
        edge: { kind: 'static', version: 'v2.0.0-rc.1+build.5' },
        default: { kind: 'static', version: 'v9.9.9' },
        'stable/rolling': { kind: 'forward', url: 'https://updates.example.com/v1/stable/rolling' },
        lab: { kind: 'forward', url: 'http://updates.lab.internal/v1', insecure: true },
      });
      t.equal(c.proxy.clusterMaintenanceConfig, undefined, 'no schedule unless configured');
    },
  },
  {
    name: 'a critical static channel and the cluster maintenance schedule',
    yaml: `proxy_service:
  automatic_upgrades_channels:
    stable/cloud: {static_version: v1.2.4, critical: true}
    edge: {static_version: v1.3.0, critical: false}
  cluster_maintenance_config:
    agent_upgrades:
      utc_start_hour: 3
      weekdays: [wed, Monday]
`,
    check: (c, w, t) => {
      t.same(c.proxy.automaticUpgradesChannels, {
        'stable/cloud': { kind: 'static', version: 'v1.2.4', critical: true },
        edge: { kind: 'static', version: 'v1.3.0' },
      });
      t.same(c.proxy.clusterMaintenanceConfig, { utcStartHour: 3, weekdays: [1, 3] });
      t.same(w, []);
    },
  },
  {
    name: 'https_keypairs, proxy_protocol on (string and YAML 1.1 boolean), tuning keys',
    yaml: `proxy_service:
  https_keypairs:
    - {cert_file: /etc/gate/a.crt, key_file: /etc/gate/a.key}
    - cert_file: b.crt
      key_file: b.key
  proxy_protocol: on
  proxy_protocol_trusted_networks: [10.0.0.0/8, "fd00::/8", 192.168.1.10]
  detect_timeout: 3s
  idle_timeout: 1m30s
  max_connections: 10000
  max_connections_per_source: 200
  high_water: 75%
  source_share: 0.05
`,
    check: (c, _w, t) => {
      t.equal(c.proxy.maxConnectionsPerSource, 200);
      t.equal(c.proxy.highWater, 0.75, 'a percentage');
      t.equal(c.proxy.sourceShare, 0.05, 'a fraction');
      const defaults = parseConfig('proxy_service: {}').config.proxy;
      t.same(
        [defaults.maxConnections, defaults.maxConnectionsPerSource, defaults.highWater, defaults.sourceShare],
        [0, 0, 0.8, 0.1],
        'defaults: the descriptor cap, no fixed per-source limit, 80%, 10%',
      );
      t.same(c.proxy.httpsKeypairs, [
        { certFile: '/etc/gate/a.crt', keyFile: '/etc/gate/a.key' },
        { certFile: 'b.crt', keyFile: 'b.key' },
      ]);
      t.equal(c.proxy.proxyProtocol, 'on');
      t.same(c.proxy.proxyProtocolTrustedNetworks, ['10.0.0.0/8', 'fd00::/8', '192.168.1.10']);
      t.equal(c.proxy.detectTimeoutMs, 3000);
      t.equal(c.proxy.idleTimeoutMs, 90_000);
      t.equal(c.proxy.maxConnections, 10000);
      const open = parseConfig('proxy_service: {proxy_protocol: true}');
      t.equal(open.config.proxy.proxyProtocol, 'on');
      t.same(open.config.proxy.proxyProtocolTrustedNetworks, ['0.0.0.0/0', '::/0'], 'unset: every source, as the platform');
      t.match(open.warnings, [/proxy_service\.proxy_protocol_trusted_networks: not set, so PROXY headers are accepted from every source/]);
    },
  },
  {
    name: 'listen addresses in multiplex mode are warned about, not errors',
    yaml: 'proxy_service:\n  mysql_listen_addr: :3036\n  upstreams: {mysql: 127.0.0.1:3306}\n',
    check: (c, w, t) => {
      t.same(c.proxy.listenAddrs.mysql, { host: '0.0.0.0', port: 3036 });
      t.equal(w.length, 1);
      t.match(w[0], /proxy_service\.mysql_listen_addr: ignored in multiplex mode/);
    },
  },
  {
    name: 'a separate-mode listen address without upstream is warned about',
    yaml: 'auth_service: {proxy_listener_mode: separate}\nproxy_service:\n  redis_listen_addr: :6380\n',
    check: (_c, w, t) => {
      t.equal(w.length, 1);
      t.match(w[0], /proxy_service\.redis_listen_addr: ignored: proxy_service\.upstreams\.redis is not set/);
    },
  },
  {
    name: 'port 0 listeners never collide (tests bind ephemeral ports)',
    yaml: `auth_service: {proxy_listener_mode: separate}
proxy_service:
  web_listen_addr: 127.0.0.1:0
  listen_addr: 127.0.0.1:0
  mysql_listen_addr: 127.0.0.1:0
  upstreams: {ssh: 127.0.0.1:22, mysql: 127.0.0.1:3306}
`,
    check: (c, w, t) => {
      t.equal(c.proxy.webListenAddr.port, 0);
      t.same(w, []);
    },
  },
  {
    name: 'diag_addr: off by default, an address of its own when set',
    yaml: 'diag_addr: 127.0.0.1:3000\n',
    check: (c, w, t) => {
      t.same(c.diagAddr, { host: '127.0.0.1', port: 3000 });
      t.equal(parseConfig('').config.diagAddr, undefined, 'absent: no diagnostics listener');
      t.same(w, []);
    },
  },
];

const invalid: InvalidCase[] = [
  { name: 'top level is a list', yaml: '- a\n- b\n', path: '(top level)', says: /expected a mapping, got a list/ },
  { name: 'YAML syntax error', yaml: 'proxy_service:\n  web_listen_addr: [unclosed\n', path: '(YAML syntax)', says: /./ },
  {
    name: 'duplicate key',
    yaml: 'proxy_service:\n  public_addr: a.example.com\n  public_addr: b.example.com\n',
    path: '(YAML syntax)',
    says: /unique/i,
    line: 3,
  },
  {
    name: 'unknown top-level key',
    yaml: 'teleport:\n  nodename: x\n',
    path: 'teleport',
    says: /unknown key; expected one of: version, data_dir/,
    line: 1,
  },
  {
    name: 'typo gets the nearest key',
    yaml: 'proxy_service:\n  web_listen_adr: :3080\n',
    path: 'proxy_service.web_listen_adr',
    says: /did you mean "web_listen_addr"\?/,
    line: 2,
  },
  {
    name: 'key in the wrong section',
    yaml: 'proxy_service:\n  proxy_listener_mode: separate\n',
    path: 'proxy_service.proxy_listener_mode',
    says: /belongs under auth_service/,
  },
  { name: 'unsupported version', yaml: 'version: v2\n', path: 'version', says: /expected "v3"/ },
  {
    name: 'bad listener mode',
    yaml: 'auth_service:\n  proxy_listener_mode: both\n',
    path: 'auth_service.proxy_listener_mode',
    says: /expected "multiplex" or "separate", got "both"/,
    line: 2,
  },
  { name: 'section is a string', yaml: 'proxy_service: yes\n', path: 'proxy_service', says: /expected a mapping, got "yes"/ },
  {
    name: 'listen address without port',
    yaml: 'proxy_service:\n  postgres_listen_addr: db.example.com\n',
    path: 'proxy_service.postgres_listen_addr',
    says: /expected host:port, \[IPv6\]:port or :port: "db.example.com" has no port/,
    line: 2,
  },
  {
    name: 'listen address is a number',
    yaml: 'proxy_service:\n  web_listen_addr: 3080\n',
    path: 'proxy_service.web_listen_addr',
    says: /expected host:port.*got number 3080/,
  },
  {
    name: 'listen port out of range',
    yaml: 'proxy_service:\n  listen_addr: ":70000"\n',
    path: 'proxy_service.listen_addr',
    says: /port "70000" is not a number in 0-65535/,
  },
  {
    name: 'unbracketed IPv6 with port',
    yaml: 'proxy_service:\n  kube_listen_addr: "::1:3026"\n',
    path: 'proxy_service.kube_listen_addr',
    says: /no port/,
  },
  {
    name: 'public_addr list item bad',
    yaml: 'proxy_service:\n  public_addr:\n    - ok.example.com\n    - "bad host"\n',
    path: 'proxy_service.public_addr[1]',
    says: /expected host\[:port\]: "bad host" contains white space/,
    line: 4,
  },
  {
    name: 'public_addr a mapping',
    yaml: 'proxy_service:\n  ssh_public_addr: {host: x}\n',
    path: 'proxy_service.ssh_public_addr',
    says: /expected a host name or IP with an optional port, or a list of them, got a mapping/,
  },
  {
    name: 'public_addr with scheme',
    yaml: 'proxy_service:\n  public_addr: https://gate.example.com\n',
    path: 'proxy_service.public_addr',
    says: /URL scheme/,
  },
  {
    name: 'upstream without port',
    yaml: 'proxy_service:\n  upstreams:\n    postgres: 127.0.0.1\n',
    path: 'proxy_service.upstreams.postgres',
    says: /expected host:port, \[IPv6\]:port or tunnel:<agent>\/<host:port>: "127.0.0.1" has no port/,
    line: 3,
  },
  {
    name: 'unknown upstream',
    yaml: 'proxy_service:\n  upstreams:\n    mongo: 127.0.0.1:27017\n',
    path: 'proxy_service.upstreams.mongo',
    says: /did you mean "mongodb"/,
  },
  {
    name: 'upstream empty',
    yaml: 'proxy_service:\n  upstreams:\n    ssh:\n',
    path: 'proxy_service.upstreams.ssh',
    says: /got an empty value/,
    line: 3,
  },
  {
    name: 'keypair missing key_file',
    yaml: 'proxy_service:\n  https_keypairs:\n    - cert_file: a.crt\n',
    path: 'proxy_service.https_keypairs[0].key_file',
    says: /expected a private key file path, got an empty value/,
  },
  {
    name: 'keypairs not a list',
    yaml: 'proxy_service:\n  https_keypairs: {cert_file: a, key_file: b}\n',
    path: 'proxy_service.https_keypairs',
    says: /expected a list of \{cert_file, key_file\}/,
  },
  {
    name: 'keypair unknown key',
    yaml: 'proxy_service:\n  https_keypairs:\n    - {cert_file: a, key_file: b, ca_file: c}\n',
    path: 'proxy_service.https_keypairs[0].ca_file',
    says: /unknown key/,
  },
  {
    name: 'proxy_protocol bad value',
    yaml: 'proxy_service:\n  proxy_protocol: maybe\n',
    path: 'proxy_service.proxy_protocol',
    says: /expected "on" or "off", got "maybe"/,
  },
  {
    name: 'trusted network not a CIDR',
    yaml: 'proxy_service:\n  proxy_protocol_trusted_networks: [10.0.0.0/40]\n',
    path: 'proxy_service.proxy_protocol_trusted_networks[0]',
    says: /expected a CIDR/,
  },
  {
    name: 'channel with both',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    stable/cloud: {static_version: v1.0.0, forward_url: "https://x.example.com"}\n',
    path: 'proxy_service.automatic_upgrades_channels["stable/cloud"]',
    says: /expected exactly one of static_version or forward_url, got both/,
    line: 3,
  },
  {
    name: 'channel with neither',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge',
    says: /got neither/,
  },
  {
    name: 'channel version not semver',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {static_version: "1.2"}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.static_version',
    says: /expected a semantic version such as v1\.2\.3, got "1\.2"/,
  },
  {
    name: 'channel version with leading zero',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {static_version: v1.02.3}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.static_version',
    says: /semantic version/,
  },
  {
    name: 'forward_url not http',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {forward_url: "ftp://x.example.com/v1"}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.forward_url',
    says: /expected an https:\/\/ URL.*scheme "ftp:"/,
  },
  {
    name: 'forward_url in plain http',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {forward_url: "http://x.example.com/v1"}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.forward_url',
    says: /plain http:\/\/ lets anyone on the path choose the version .*allow_insecure_forward_url: true/,
  },
  {
    name: 'forward_url in plain http, allow_insecure_forward_url not true',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {forward_url: "http://x.example.com/v1", allow_insecure_forward_url: false}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.forward_url',
    says: /plain http:\/\//,
  },
  {
    name: 'allow_insecure_forward_url beside static_version',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {static_version: v1.0.0, allow_insecure_forward_url: true}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.allow_insecure_forward_url',
    says: /only beside forward_url/,
  },
  {
    name: 'forward_url with query',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {forward_url: "https://x.example.com/v1?a=b"}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.forward_url',
    says: /without query or fragment/,
  },
  {
    name: 'forward_url not a URL',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {forward_url: "not a url"}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.forward_url',
    says: /expected an http/,
  },
  {
    name: 'channel name upper case',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    Stable: {static_version: v1.0.0}\n',
    path: 'proxy_service.automatic_upgrades_channels.Stable',
    says: /bad channel name: .*lower-case/,
  },
  {
    name: 'channel name with ..',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    stable/../x: {static_version: v1.0.0}\n',
    path: 'proxy_service.automatic_upgrades_channels["stable/../x"]',
    says: /may not have a "\.\." segment/,
  },
  {
    name: 'channel name with empty segment',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    stable//x: {static_version: v1.0.0}\n',
    path: 'proxy_service.automatic_upgrades_channels["stable//x"]',
    says: /empty segment/,
  },
  {
    name: 'channel unknown key',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {static_version: v1.0.0, urgent: true}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.urgent',
    says: /unknown key/,
  },
  {
    name: 'critical beside forward_url',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {forward_url: "https://x.example.com/v1", critical: true}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.critical',
    says: /only beside static_version/,
  },
  {
    name: 'critical not a boolean',
    yaml: 'proxy_service:\n  automatic_upgrades_channels:\n    edge: {static_version: v1.0.0, critical: "yes"}\n',
    path: 'proxy_service.automatic_upgrades_channels.edge.critical',
    says: /expected true or false, got "yes"/,
  },
  {
    name: 'maintenance config hour out of range',
    yaml: 'proxy_service:\n  cluster_maintenance_config:\n    agent_upgrades: {utc_start_hour: 24}\n',
    path: 'proxy_service.cluster_maintenance_config.agent_upgrades.utc_start_hour',
    says: /from 0 to 23, got 24/,
  },
  {
    name: 'maintenance config bad weekday',
    yaml: 'proxy_service:\n  cluster_maintenance_config:\n    agent_upgrades: {utc_start_hour: 2, weekdays: [Mon, Funday]}\n',
    path: 'proxy_service.cluster_maintenance_config.agent_upgrades.weekdays[1]',
    says: /"Funday" is not a day name/,
  },
  {
    name: 'maintenance config without agent_upgrades',
    yaml: 'proxy_service:\n  cluster_maintenance_config: {}\n',
    path: 'proxy_service.cluster_maintenance_config.agent_upgrades',
    says: /missing or not an object/,
  },
  {
    name: 'maintenance config unknown key',
    yaml: 'proxy_service:\n  cluster_maintenance_config:\n    agent_upgrade: {utc_start_hour: 2}\n',
    path: 'proxy_service.cluster_maintenance_config.agent_upgrade',
    says: /did you mean "agent_upgrades"/,
  },
  {
    name: 'duration without unit',
    yaml: 'proxy_service:\n  idle_timeout: 30\n',
    path: 'proxy_service.idle_timeout',
    says: /expected a duration such as 10s, 500ms or 1m30s, got number 30/,
  },
  {
    name: 'detect_timeout zero',
    yaml: 'proxy_service:\n  detect_timeout: "0"\n',
    path: 'proxy_service.detect_timeout',
    says: /at least 100ms/,
  },
  {
    name: 'detect_timeout 1ms',
    yaml: 'proxy_service:\n  detect_timeout: 1ms\n',
    path: 'proxy_service.detect_timeout',
    says: /at least 100ms \(detection must be bounded, and a shorter one cuts real clients\), got 1ms/,
  },
  {
    name: 'idle_timeout 5ms',
    yaml: 'proxy_service:\n  idle_timeout: 5ms\n',
    path: 'proxy_service.idle_timeout',
    says: /at least 100ms \(or 0\)/,
  },
  {
    name: 'idle_timeout past what a timer holds',
    yaml: 'proxy_service:\n  idle_timeout: 1000h\n',
    path: 'proxy_service.idle_timeout',
    says: /at most 596h/,
  },
  {
    name: 'connection_upgrade_ping_interval 0',
    yaml: 'proxy_service:\n  connection_upgrade_ping_interval: 0\n',
    path: 'proxy_service.connection_upgrade_ping_interval',
    says: /at least 100ms/,
  },
  {
    name: 'web_headers_timeout 10ms',
    yaml: 'proxy_service:\n  web_headers_timeout: 10ms\n',
    path: 'proxy_service.web_headers_timeout',
    says: /at least 100ms/,
  },
  {
    name: 'web_request_timeout below web_headers_timeout',
    yaml: 'proxy_service:\n  web_headers_timeout: 20s\n  web_request_timeout: 10s\n',
    path: 'proxy_service.web_request_timeout',
    says: /at least web_headers_timeout \(20s\)/,
  },
  {
    name: 'max_connections negative',
    yaml: 'proxy_service:\n  max_connections: -1\n',
    path: 'proxy_service.max_connections',
    says: /expected a whole number >= 0/,
  },
  {
    name: 'max_connections fractional',
    yaml: 'proxy_service:\n  max_connections: 1.5\n',
    path: 'proxy_service.max_connections',
    says: /whole number/,
  },
  {
    name: 'separate mode port clash with web',
    yaml: 'auth_service: {proxy_listener_mode: separate}\nproxy_service:\n  web_listen_addr: 0.0.0.0:3080\n  mysql_listen_addr: 127.0.0.1:3080\n  upstreams: {mysql: 127.0.0.1:3306}\n',
    path: 'proxy_service.mysql_listen_addr',
    says: /expected an address of its own, but 127\.0\.0\.1:3080 is also proxy_service\.web_listen_addr/,
    line: 4,
  },
  {
    name: 'separate mode default port clash',
    yaml: 'auth_service: {proxy_listener_mode: separate}\nproxy_service:\n  listen_addr: :3024\n  upstreams: {ssh: 127.0.0.1:22}\n',
    path: 'proxy_service.tunnel_listen_addr',
    says: /0\.0\.0\.0:3024 \(its default\) is also proxy_service\.listen_addr/,
  },
  {
    name: 'upstreams.tunnel is gone',
    yaml: 'proxy_service:\n  upstreams: {tunnel: 127.0.0.1:3024}\n',
    path: 'proxy_service.upstreams.tunnel',
    says: /no longer used: the proxy hosts agents' reverse tunnels itself.*tunnel:<agent>\/<host:port>/,
  },
  {
    name: 'tunnel upstream without target',
    yaml: 'proxy_service:\n  upstreams: {postgres: "tunnel:db-agent"}\n',
    path: 'proxy_service.upstreams.postgres',
    says: /expected tunnel:<agent>\/<host:port>/,
  },
  {
    name: 'peering through an agent',
    yaml: 'proxy_service:\n  upstreams: {peer: "tunnel:a/10.0.0.2:3021"}\n',
    path: 'proxy_service.upstreams.peer',
    says: /no longer used: the proxy serves peering itself/,
  },
  {
    name: 'a peer upstream (from before the proxy served peering itself)',
    yaml: 'proxy_service:\n  upstreams: {peer: 10.0.0.2:3021}\n',
    path: 'proxy_service.upstreams.peer',
    says: /remove this key and set peer_listen_addr/,
  },
  {
    name: 'join token too short',
    yaml: 'auth_service:\n  join_tokens: [{token: short}]\n',
    path: 'auth_service.join_tokens[0].token',
    says: /at least 16 characters \(got 5\)/,
  },
  {
    name: 'join token listed twice',
    yaml: 'auth_service:\n  join_tokens: [{token: aaaaaaaaaaaaaaaaaaaa}, {token: aaaaaaaaaaaaaaaaaaaa}]\n',
    path: 'auth_service.join_tokens[1].token',
    says: /listed twice/,
  },
  {
    name: 'join token bad agent name',
    yaml: 'auth_service:\n  join_tokens: [{token: aaaaaaaaaaaaaaaaaaaa, agents: ["a b"]}]\n',
    path: 'auth_service.join_tokens[0].agents[0]',
    says: /expected an agent name/,
  },
  {
    name: 'join token bad expiry',
    yaml: 'auth_service:\n  join_tokens: [{token: aaaaaaaaaaaaaaaaaaaa, expires: tomorrow}]\n',
    path: 'auth_service.join_tokens[0].expires',
    says: /RFC 3339/,
  },
  {
    name: 'join token zero uses',
    yaml: 'auth_service:\n  join_tokens: [{token: aaaaaaaaaaaaaaaaaaaa, max_uses: 0}]\n',
    path: 'auth_service.join_tokens[0].max_uses',
    says: /whole number >= 1/,
  },
  {
    name: 'join token not a mapping',
    yaml: 'auth_service:\n  join_tokens: [aaaaaaaaaaaaaaaaaaaa]\n',
    path: 'auth_service.join_tokens[0]',
    says: /expected a mapping with token/,
  },
  {
    name: 'join tokens not a list',
    yaml: 'auth_service:\n  join_tokens: {token: x}\n',
    path: 'auth_service.join_tokens',
    says: /expected a list/,
  },
  {
    name: 'join token agents not a list',
    yaml: 'auth_service:\n  join_tokens: [{token: aaaaaaaaaaaaaaaaaaaa, agents: {a: 1}}]\n',
    path: 'auth_service.join_tokens[0].agents',
    says: /expected a list of agent names/,
  },
  {
    name: 'join token missing',
    yaml: 'auth_service:\n  join_tokens: [{agents: [a]}]\n',
    path: 'auth_service.join_tokens[0].token',
    says: /expected a secret string/,
  },
  {
    name: 'agent certificate lifetime too short',
    yaml: 'auth_service:\n  agent_certificate_ttl: 30s\n',
    path: 'auth_service.agent_certificate_ttl',
    says: /at least 1m/,
  },
  {
    name: 'revocation list not a list',
    yaml: 'auth_service:\n  revoked_agent_certificates: abc\n',
    path: 'auth_service.revoked_agent_certificates',
    says: /serial numbers/,
  },
  {
    name: 'join rate limit not a mapping',
    yaml: 'auth_service:\n  join_rate_limit: 10\n',
    path: 'auth_service.join_rate_limit',
    says: /burst, per_minute/,
  },
  {
    name: 'join rate limit burst 0',
    yaml: 'auth_service:\n  join_rate_limit: {burst: 0}\n',
    path: 'auth_service.join_rate_limit.burst',
    says: />= 1/,
  },
  {
    name: 'renew rate limit misspelt key',
    yaml: 'auth_service:\n  renew_rate_limit: {per_minut: 5}\n',
    path: 'auth_service.renew_rate_limit.per_minut',
    says: /per_minute/,
  },
  {
    name: 'join body timeout too long',
    yaml: 'auth_service:\n  join_body_timeout: 5m\n',
    path: 'auth_service.join_body_timeout',
    says: /at most 1m, got 5m/,
  },
  {
    name: 'revoked serial not hex',
    yaml: 'auth_service:\n  revoked_agent_certificates: [xyz]\n',
    path: 'auth_service.revoked_agent_certificates[0]',
    says: /serial number in hex/,
  },
  {
    name: 'peer port clash in multiplex mode',
    yaml: 'proxy_service:\n  web_listen_addr: 127.0.0.1:3080\n  peer_listen_addr: 127.0.0.1:3080\n',
    path: 'proxy_service.peer_listen_addr',
    says: /is also proxy_service\.web_listen_addr/,
  },
  {
    name: 'high_water above 1',
    yaml: 'proxy_service:\n  high_water: 1.5\n',
    path: 'proxy_service.high_water',
    says: /expected a fraction above 0 and at most 1, such as 0\.8 or 80%, got number 1\.5/,
  },
  {
    name: 'source_share zero',
    yaml: 'proxy_service:\n  source_share: 0%\n',
    path: 'proxy_service.source_share',
    says: /expected a fraction above 0/,
  },
  {
    name: 'max_connections_per_source text',
    yaml: 'proxy_service:\n  max_connections_per_source: lots\n',
    path: 'proxy_service.max_connections_per_source',
    says: /expected a whole number >= 0 \(0: none\)/,
  },
  { name: 'data_dir empty', yaml: 'data_dir: ""\n', path: 'data_dir', says: /expected a directory path/ },
  {
    name: 'diag_addr on the public port',
    yaml: 'diag_addr: 127.0.0.1:3080\nproxy_service:\n  web_listen_addr: 0.0.0.0:3080\n',
    path: 'diag_addr',
    says: /never a public listener's: 127\.0\.0\.1:3080 is also proxy_service\.web_listen_addr/,
    line: 1,
  },
  {
    name: 'diag_addr on the default public port',
    yaml: 'diag_addr: 0.0.0.0:3080\n',
    path: 'diag_addr',
    says: /is also proxy_service\.web_listen_addr/,
  },
  {
    name: 'diag_addr on the peering port',
    yaml: 'diag_addr: 127.0.0.1:3021\nproxy_service:\n  peer_listen_addr: 0.0.0.0:3021\n',
    path: 'diag_addr',
    says: /is also proxy_service\.peer_listen_addr/,
  },
  { name: 'diag_addr without a port', yaml: 'diag_addr: 127.0.0.1\n', path: 'diag_addr', says: /expected host:port/ },
  { name: 'diag_addr as a URL', yaml: 'diag_addr: http://127.0.0.1:3000\n', path: 'diag_addr', says: /URL scheme/ },
];

t.ok(valid.length + invalid.length >= 25, 'the table holds at least 25 files');

for (const c of valid) {
  t.test(`valid: ${c.name}`, async (t) => {
    const { config, warnings } = parseConfig(c.yaml);
    c.check(config, warnings, t);
  });
}

for (const c of invalid) {
  t.test(`invalid: ${c.name}`, async (t) => {
    let caught: unknown;
    try {
      parseConfig(c.yaml, { source: 'table.yaml' });
    } catch (err) {
      caught = err;
    }
    t.ok(isGateError(caught, ErrorCodes.CONFIG_INVALID), 'GATE_ERR_CONFIG_INVALID');
    t.ok(caught instanceof ConfigError);
    if (!(caught instanceof ConfigError)) return;
    t.match(caught.message, /^invalid configuration table\.yaml:/);
    t.ok(caught.message.includes(`${c.path}: `), `message names ${c.path}:\n${caught.message}`);
    const problem = caught.problems.find((p) => p.path === c.path);
    t.ok(problem, 'a problem carries the path');
    t.match(problem?.message, c.says);
    if (c.line !== undefined) t.equal(problem?.line, c.line, 'line number');
  });
}

t.test('all problems are reported at once, in file order', async (t) => {
  const yaml = 'proxy_service:\n  upstreams: {ssh: nope}\n  web_listen_addr: x\nauth_service: {proxy_listener_mode: y}\n';
  const err = t.throws(() => parseConfig(yaml)) as ConfigError;
  t.same(
    err.problems.map((p) => [p.line, p.path]),
    [
      [2, 'proxy_service.upstreams.ssh'],
      [3, 'proxy_service.web_listen_addr'],
      [4, 'auth_service.proxy_listener_mode'],
    ],
  );
});

t.test('loadConfig reads a file and names it; a missing file is a ConfigError', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'gate-config-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'gate.yaml');
  await writeFile(file, 'proxy_service:\n  max_connections: many\n');
  await t.rejects(loadConfig(file), {
    code: 'GATE_ERR_CONFIG_INVALID',
    message: new RegExp(`${file}:\\n  line 2: proxy_service\\.max_connections`),
  });
  await t.rejects(loadConfig(join(dir, 'absent.yaml')), { code: 'GATE_ERR_CONFIG_INVALID', message: /cannot read the file: ENOENT/ });
});

t.test('the example configuration loads cleanly', async (t) => {
  const path = fileURLToPath(new URL('../../../examples/gate.yaml', import.meta.url));
  const { config, warnings } = await loadConfig(path);
  t.same(warnings, []);
  t.equal(config.listenerMode, 'multiplex');
  t.same(config.proxy.webListenAddr, { host: '127.0.0.1', port: 3080 });
  t.same(config.proxy.publicAddrs, [{ host: 'localhost', port: 3080 }]);
  t.same(config.proxy.upstreams.ssh, { host: '127.0.0.1', port: 22 });
  t.same(
    config.proxy.upstreams.postgres,
    { agent: 'local-agent', target: '127.0.0.1:5432' },
    'PostgreSQL behind the agent the README starts',
  );
  t.equal(config.dataDir, '.data');
  t.same(config.proxy.automaticUpgradesChannels['stable/cloud'], { kind: 'static', version: 'v0.1.0' });
  t.same(
    [
      config.proxy.detectTimeoutMs,
      config.proxy.idleTimeoutMs,
      config.proxy.maxConnections,
      config.proxy.maxConnectionsPerSource,
      config.proxy.highWater,
      config.proxy.sourceShare,
    ],
    [5000, 3_600_000, 0, 0, 0.8, 0.1],
    'production defaults: a 5 s detection deadline, a 1 h idle timeout, the cap from the descriptor limit, the fair share',
  );
});
