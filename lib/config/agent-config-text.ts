import { stringify } from 'yaml';
import { DEFAULT_AGENT_STATE_DIR, DEFAULT_UPGRADE_CHANNEL, type AgentResource, type PackageManager } from './agent-config.js';
import { DEFAULT_UPDATE_GROUP } from '../wire/names.js';

/** What `gate-mux agent configure` was given. */
export interface AgentConfigInput {
  proxy: string;
  token?: string | undefined;
  caPin?: string | undefined;
  name: string;
  allow: string[];
  resources: AgentResource[];
  stateDir?: string | undefined;
  tunnelAddr?: string | undefined;
  serverName?: string | undefined;
  upgradeChannel?: string | undefined;
  updateGroup?: string | undefined;
  packageManager?: PackageManager | undefined;
  /** The JSON Schema editors check the file against (a URL or file path for its yaml-language-server first line); none when absent. */
  schemaUrl?: string | undefined;
}

/**
 * One YAML scalar on one line, quoted when it needs to be (a token of digits stays a string). What
 * the library would write as a block (a value with a line break) is written double-quoted instead:
 * a JSON string is a valid YAML double-quoted scalar, and stays on the key's line.
 */
function scalar(value: string): string {
  const text = stringify(value, { lineWidth: 0 }).trimEnd();
  return text.includes('\n') ? JSON.stringify(value) : text;
}

/**
 * The commented YAML `gate-mux agent configure` writes. Every value passes through the YAML
 * library's quoting, so no input can add a key; `parseAgentConfig` reads it back to the same values
 * (the configure test checks that round trip). Pure.
 */
export function renderAgentConfig(input: AgentConfigInput): string {
  const optional = (key: string, value: string | undefined, comment: string): string[] =>
    value === undefined ? [`# ${key}: ${comment}`] : [`${key}: ${scalar(value)}`];
  const lines = [
    ...(input.schemaUrl === undefined ? [] : [`# yaml-language-server: $schema=${input.schemaUrl}`]),
    '# gate-mux agent configuration, read by `gate-mux agent --config FILE` (gate-agent.service) and',
    '# by `gate-upgrade`. Flags given to `gate-mux agent` override these keys. Written by',
    '# `gate-mux agent configure`; mode 0600 because it holds the join token.',
    '',
    "# The proxy's web address (host:port): joining, certificate renewal, the updater's questions, and",
    '# the reverse tunnel unless tunnel_addr is set. HTTPS_PROXY, else HTTP_PROXY, and NO_PROXY apply.',
    `proxy: ${scalar(input.proxy)}`,
    ...optional('tunnel_addr', input.tunnelAddr, 'host:port   # the tunnel port when the proxy runs separate ports'),
    ...optional('server_name', input.serverName, "name        # the name the proxy's certificate is checked for (default: the proxy host)"),
    '',
    '# The name this agent joins as (its certificate carries it; routes say tunnel:<name>/<host:port>).',
    `name: ${scalar(input.name)}`,
    '# Key, certificate and the cluster CA (ca.pem, which gate-upgrade trusts) are kept here.',
    `state_dir: ${scalar(input.stateDir ?? DEFAULT_AGENT_STATE_DIR)}`,
    '',
    '# Needed only until the first join; the identity in state_dir is used from then on, and these',
    '# two lines may be deleted.',
    ...optional('token', input.token, 'the join token'),
    ...optional('ca_pin', input.caPin, 'sha256:...   # the CA pin the proxy prints at start'),
    '',
    '# Targets (host:port) the proxy may ask this agent to dial. The resources below are allowed too.',
    ...(input.allow.length === 0 ? ['allow: []'] : ['allow:', ...input.allow.map((a) => `  - ${scalar(a)}`)]),
    '',
    '# What this agent serves, by kind (db, ssh, kube, app, desktop), each with the address clients',
    '# know it by (public_addr: a name or IP, or a list of them).',
    ...(input.resources.length === 0
      ? [
          'resources: []',
          '# resources:',
          '#   - kind: db',
          '#     name: orders',
          '#     target: 10.0.0.5:5432',
          '#     public_addr: orders.db.example.com',
        ]
      : [
          'resources:',
          ...input.resources.flatMap((r) => [
            `  - kind: ${r.kind}`,
            `    name: ${scalar(r.name)}`,
            `    target: ${scalar(r.target)}`,
            ...(r.publicAddr.length === 0
              ? []
              : r.publicAddr.length === 1
                ? [`    public_addr: ${scalar(r.publicAddr[0]!)}`]
                : ['    public_addr:', ...r.publicAddr.map((a) => `      - ${scalar(a)}`)]),
          ]),
        ]),
    '',
    '# connection_count: 2        # tunnels to keep, each to a distinct proxy of a cluster',
    '# dial_timeout: 10s',
    '# log_level: warn',
    '',
    '# Automatic updates (package gate-ent-updater: gate-upgrade.timer runs `gate-upgrade run`).',
    'updater:',
    `  channel: ${scalar(input.upgradeChannel ?? DEFAULT_UPGRADE_CHANNEL)}`,
    "  # The rollout group the cluster's autoupdate_config updates this agent with (dev, staging, prod...).",
    `  group: ${scalar(input.updateGroup ?? DEFAULT_UPDATE_GROUP)}`,
    ...(input.packageManager === undefined
      ? ['  # package_manager: apt     # apt, dnf or zypper; default: the one this machine has']
      : [`  package_manager: ${input.packageManager}`]),
    '  # Instead of a package manager, a command ({version} is replaced; run without a shell):',
    '  # install_command: /usr/local/sbin/install-gate {version}',
    '  # version_command: /usr/bin/gate-mux --version',
    '',
  ];
  return lines.join('\n');
}
