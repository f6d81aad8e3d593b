import { schema as s, type SchemaNode } from './schema.js';
import { SERVICE_KINDS } from '../vocabulary/service-kinds.js';
import { DEFAULT_UPDATE_GROUP } from '../wire/names.js';

/**
 * The agent's configuration file (agent.yaml), declared once: every key, what it takes, and what it
 * is for. agent-config.ts checks keys against it and reads the values; schema/agent.schema.json is
 * generated from it (`npm run schema`) for editors.
 */

/** yum is dnf's older name (the platform's document lists apt, yum, zypper); both run the same way. */
export const PACKAGE_MANAGERS = ['apt', 'dnf', 'yum', 'zypper'] as const;

/** Where the agent keeps its key and certificates unless `state_dir` says otherwise. */
export const DEFAULT_AGENT_STATE_DIR = '/var/lib/gate/agent';
/** The channel an updater follows unless `updater.channel` says otherwise. */
export const DEFAULT_UPGRADE_CHANNEL = 'default';

const optional = (description: string): SchemaNode => s.string(description, { nullable: true });

export const AGENT_SCHEMA: SchemaNode = s.section(
  'gate-mux agent configuration (agent.yaml), read by `gate-mux agent --config` and `gate-upgrade`. Unknown keys are errors.',
  {
    proxy: s.string("The proxy's web address (host:port): joining, renewal, the updater, and the tunnel unless tunnel_addr is set."),
    tunnel_addr: s.string('The tunnel port (host:port) when the proxy runs separate ports.'),
    server_name: optional("The name the proxy's certificate is checked for (default: the proxy host)."),
    name: s.string('The name this agent joins as: letters, digits, dots, hyphens and underscores.'),
    state_dir: s.string('Where the key, certificates and cluster CA are kept.', { nullable: true, default: DEFAULT_AGENT_STATE_DIR }),
    token: optional('The join token, needed only until the first join.'),
    ca_pin: s.string('The CA pin the proxy prints at start.', { pattern: '^\\s*[Ss][Hh][Aa]256:[0-9A-Fa-f]{64}\\s*$' }),
    cert_file: optional('A pre-issued certificate instead of joining.'),
    key_file: optional("The pre-issued certificate's key."),
    ca_file: optional("The CA that issued the proxy's certificate, with a pre-issued identity."),
    allow: s.list(
      "Targets (host:port) the proxy may ask this agent to dial; the resources' targets are allowed too.",
      s.string('host:port'),
      {
        nullable: true,
      },
    ),
    resources: s.list(
      'What this agent serves, each with the address clients know it by.',
      s.section(
        'One resource.',
        {
          kind: s.oneOf('The kind of service.', SERVICE_KINDS),
          name: s.string('The resource name.'),
          target: s.string('host:port the agent dials, in its own network.'),
          public_addr: s.stringOrList('The addresses clients know it by (a name or IP, or a list of them).'),
        },
        { required: ['kind', 'name', 'target'], nullable: true },
      ),
      { nullable: true },
    ),
    connection_count: s.integer('Tunnels to keep, each to a distinct proxy of a cluster.', 1, { maximum: 64 }),
    dial_timeout: s.duration('How long a dial to a target may take.'),
    log_level: optional('The log level on stderr (default warn).'),
    updater: s.section(
      'Automatic updates (package gate-ent-updater: gate-upgrade.timer runs `gate-upgrade run`).',
      {
        channel: s.string('The upgrade channel followed, such as default or stable/cloud.', { default: DEFAULT_UPGRADE_CHANNEL }),
        group: s.string(
          "The rollout group this agent is in (the cluster's autoupdate_config updates its groups in order): letters, digits, '.', '_', '-'.",
          { default: DEFAULT_UPDATE_GROUP, pattern: '^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$' },
        ),
        package_manager: s.oneOf('How to install a version (default: the one this machine has).', PACKAGE_MANAGERS),
        install_command: optional('Instead of a package manager: a command with {version} (run without a shell).'),
        version_command: optional('A command that prints the installed version.'),
        allow_downgrade: s.boolean(
          'Install a version lower than the running one when the channel serves it (after a cluster rollback). Default false: refused, critical or not.',
        ),
      },
      { nullable: true },
    ),
  },
  { required: ['proxy', 'name'], nullable: true },
);
