import { MAX_CHANNEL_NAME_LENGTH } from './channel.js';
import { LISTEN_ADDR_KEYS } from './listen-addresses.js';
import { schema as s, type SchemaNode } from './schema.js';
import { UPSTREAM_PROTOCOLS } from './types.js';
import { DEFAULT_HIGH_WATER, DEFAULT_SOURCE_SHARE } from '../mux/connection-budget.js';
import { MUX_DEFAULTS } from '../mux/options.js';
import { DEFAULT_JOIN_LIMITS, type RateLimit } from '../vocabulary/join-limits.js';

/**
 * The proxy's configuration file (gate.yaml), declared once: every key, what it takes, and what it
 * is for. validate.ts checks keys against it and reads the values; schema/gate.schema.json is
 * generated from it (`npm run schema`) for editors.
 */

const LISTEN = 'host:port, [IPv6]:port or :port';

// Defaults the readers (validate.ts) apply and the schema shows, kept here so both use one value.
export const DEFAULT_WEB_LISTEN = '0.0.0.0:3080';
/** A crashed proxy should stop being dialled within 15 s. */
export const DEFAULT_PRESENCE_TTL_MS = 10_000;
export const DEFAULT_AGENT_CERTIFICATE_TTL_MS = 60 * 60 * 1000;
/** As lib/conn-upgrade's default (config may not import it): below nginx's and AWS ALB's 60 s idle timeouts. */
export const DEFAULT_UPGRADE_PING_INTERVAL_MS = 15_000;
/**
 * The web endpoints' deadlines (lib/web/request-deadlines.ts). 10 s for headers: the detection
 * deadline's default, ample for a few hundred bytes on a bad link. 30 s for a whole request: the
 * proxy's bodies are small (a join is under 64 KiB, with its own 1.5 s body deadline); Node's own
 * 60 s / 300 s are meant for uploads it never takes.
 */
export const DEFAULT_WEB_HEADERS_TIMEOUT_MS = 10_000;
export const DEFAULT_WEB_REQUEST_TIMEOUT_MS = 30_000;
/** Longest either web deadline may be: past it they no longer free slots from stalled clients. */
export const MAX_WEB_DEADLINE_MS = 10 * 60_000;

const listenAddrs: Record<string, SchemaNode> = Object.fromEntries(
  UPSTREAM_PROTOCOLS.map((protocol) => [
    LISTEN_ADDR_KEYS[protocol],
    s.string(
      protocol === 'peer'
        ? `Where other proxies of the cluster dial this one (${LISTEN}; mutual TLS between proxies). Off when unset.`
        : `The ${protocol} listener's own port in separate mode (${LISTEN}); ignored in multiplex mode.`,
    ),
  ]),
);

const publicAddr = (what: string): SchemaNode =>
  s.stringOrList(`${what} (host[:port], or a list; the port defaults to the one that protocol is served on).`);

const rateLimit = (what: string, fallback: RateLimit): SchemaNode =>
  s.section(`${what} per source address (after a trusted PROXY header); past them the proxy answers 429.`, {
    burst: s.integer('Requests allowed at once.', 1, { default: fallback.burst }),
    per_minute: s.integer('Requests the allowance refills by each minute.', 0, { default: fallback.perMinute }),
  });

const trustedNetworks = (description: string): SchemaNode => s.list(description, s.string('A CIDR such as 10.0.0.0/8, or an IP.'));

const upstreams: Record<string, SchemaNode> = Object.fromEntries(
  UPSTREAM_PROTOCOLS.map((protocol): [string, SchemaNode] => [
    protocol,
    protocol === 'tunnel'
      ? s.retired("No longer used: the proxy hosts agents' reverse tunnels itself; use tunnel:<agent>/<host:port> on a protocol.")
      : protocol === 'peer'
        ? s.retired('No longer used: the proxy serves peering itself; set proxy_service.peer_listen_addr.')
        : s.string(`Where ${protocol} traffic goes: host:port the proxy dials, or tunnel:<agent>/<host:port> an agent dials.`),
  ]),
);

const channel = s.section('One upgrade channel: exactly one of static_version or forward_url.', {
  static_version: s.string('The version this channel serves, such as v1.2.3.'),
  forward_url: s.string(
    'An https:// URL whose /version and /critical this channel forwards (no query or fragment); http:// only with allow_insecure_forward_url.',
  ),
  allow_insecure_forward_url: s.boolean(
    'Accept a plain http:// forward_url: its answers choose the version every enrolled agent installs as root, so only on a network you trust.',
  ),
  critical: s.boolean('Updaters install static_version at once instead of waiting for the maintenance window.'),
});
channel.oneOf = [{ required: ['static_version'] }, { required: ['forward_url'] }];

export const GATE_SCHEMA: SchemaNode = s.section(
  'gate-mux proxy configuration (gate.yaml). Unknown keys are errors.',
  {
    version: s.oneOf('The file format version; only v3 is read.', ['v3']),
    data_dir: s.string('Where the proxy keeps its CA, certificates and join token.'),
    diag_addr: s.string(
      "Plain HTTP /healthz, /readyz, /metrics and /v1/inventory on a port of its own (host:port, never a public listener's; not loopback only with diag_token_file). Off when absent.",
    ),
    diag_token_file: s.string(
      'A file holding the bearer token (16+ characters) /metrics and /v1/inventory ask for on diag_addr; required unless diag_addr is a loopback address.',
    ),
    auth_service: s.section(
      'How agents join and how listeners are laid out.',
      {
        proxy_listener_mode: s.oneOf(
          'multiplex: one port serves every protocol, routed by TLS SNI/ALPN or greeting; separate: each protocol also gets its own port.',
          ['multiplex', 'separate'],
          'multiplex',
        ),
        join_tokens: s.list(
          'Static tokens agents join with.',
          s.section(
            'One join token.',
            {
              token: s.string('The secret (at least 16 characters; never logged).', { minLength: 16 }),
              agents: s.stringOrList('Agent names it may join as (default: any).'),
              expires: s.string('When it stops being accepted, RFC 3339 (2026-12-31T00:00:00Z).'),
              max_uses: s.integer('Joins it admits, counted while the proxy runs.', 1),
            },
            { required: ['token'] },
          ),
        ),
        development_token: s.boolean(
          'Accept the development token in <data_dir>/join-token (any agent name, no expiry, no use limit). Default: on without join_tokens, off with them.',
        ),
        agent_certificate_ttl: s.duration(
          "Lifetime of an agent's certificate (at least 1m); agents renew at two thirds of it.",
          DEFAULT_AGENT_CERTIFICATE_TTL_MS,
        ),
        revoked_agent_certificates: s.list(
          'Agent certificate serial numbers the tunnel route refuses.',
          s.string('A serial number in hex, colons allowed (5f:3a:...).', { pattern: '^\\s*[0-9A-Fa-f:]+\\s*$' }),
        ),
        join_rate_limit: rateLimit('Joins', DEFAULT_JOIN_LIMITS.join),
        renew_rate_limit: rateLimit('Certificate renewals', DEFAULT_JOIN_LIMITS.renew),
        join_body_timeout: s.duration(
          'Deadline for a join or renewal body (100ms to 1m); past it the proxy answers 408.',
          DEFAULT_JOIN_LIMITS.bodyTimeoutMs,
        ),
      },
      { nullable: true },
    ),
    proxy_service: s.section(
      'Listeners, certificates, routing and limits.',
      {
        web_listen_addr: s.string(`The main listener (${LISTEN}).`, { default: DEFAULT_WEB_LISTEN }),
        public_addr: publicAddr('What clients are told to dial; the first is used'),
        ssh_public_addr: publicAddr('What SSH clients are told to dial'),
        tunnel_public_addr: publicAddr('What agents are told to dial for their reverse tunnel'),
        kube_public_addr: publicAddr('What Kubernetes clients are told to dial'),
        postgres_public_addr: publicAddr('What PostgreSQL clients are told to dial'),
        mysql_public_addr: publicAddr('What MySQL clients are told to dial'),
        ...listenAddrs,
        https_keypairs: s.list(
          'TLS certificates for the web endpoint, chosen by SNI.',
          s.section(
            'A certificate and its key (PEM files).',
            { cert_file: s.string('The certificate chain file.'), key_file: s.string('The private key file.') },
            { required: ['cert_file', 'key_file'] },
          ),
        ),
        proxy_protocol: s.oneOf(
          'on: every connection begins with a PROXY v1/v2 header (behind a load balancer that adds it).',
          ['on', 'off', true, false],
          'off',
        ),
        proxy_protocol_trusted_networks: trustedNetworks('Where PROXY headers are accepted from (default: anywhere).'),
        connection_upgrade_trusted_networks: trustedNetworks(
          'Load balancers whose X-Forwarded-For names the client on a connection upgrade (default: none).',
        ),
        connection_upgrade_ping_interval: s.duration(
          "WebSocket pings on upgraded connections; keep below the balancer's idle timeout.",
          DEFAULT_UPGRADE_PING_INTERVAL_MS,
        ),
        automatic_upgrades_channels: s.mapOf(
          'Upgrade channels by name (stable/cloud), served at /v1/webapi/automaticupgrades/channel/<name>/version.',
          '^[a-z0-9._/-]+$',
          MAX_CHANNEL_NAME_LENGTH,
          channel,
        ),
        cluster_maintenance_config: s.section("The agents' maintenance window, served for `gate-upgrade export-schedule`.", {
          agent_upgrades: s.section(
            'One hour from utc_start_hour on each listed day.',
            {
              utc_start_hour: s.integer('The hour (UTC) the window opens.', 0, { maximum: 23 }),
              weekdays: s.list('Days (Sunday or Sun, any case); default: every day.', s.string('A day name.'), { nullable: true }),
            },
            { required: ['utc_start_hour'] },
          ),
        }),
        upstreams: s.section("Where each protocol's traffic goes; a protocol left out is not routed.", upstreams, { nullable: true }),
        detect_timeout: s.duration(
          'How long a connection that has not said what it is may hold a slot (at least 100ms).',
          MUX_DEFAULTS.detectTimeoutMs,
        ),
        idle_timeout: s.duration('Routed connections that carry nothing this long are closed (0: never; else at least 100ms).', 0),
        web_headers_timeout: s.duration(
          "How long a web connection may take to send a request's headers (100ms to 10m); past it the proxy answers 408 and closes.",
          DEFAULT_WEB_HEADERS_TIMEOUT_MS,
        ),
        web_request_timeout: s.duration(
          'How long a web connection may take to send a whole request, body included (web_headers_timeout to 10m).',
          DEFAULT_WEB_REQUEST_TIMEOUT_MS,
        ),
        max_connections: s.integer('Open connections over all listeners (0: what the open-file limit carries).', 0, { default: 0 }),
        max_connections_per_source: s.integer('Open connections from one address (0: none).', 0, { default: 0 }),
        high_water: s.fraction('From this share of max_connections on, one address holds at most source_share of it.', DEFAULT_HIGH_WATER),
        source_share: s.fraction('The share of max_connections one address may hold past high_water.', DEFAULT_SOURCE_SHARE),
        peer_public_addr: s.string('What the other proxies dial (host[:port], never a wildcard address).'),
      },
      { nullable: true },
    ),
    cluster: s.section(
      'Several proxies as one cluster; without it the proxy runs alone.',
      {
        store: s.string('memory (default), redis://[:password@]host[:port][/db] or rediss://…'),
        store_ca_file: s.string('A PEM CA for rediss:// with a private CA.'),
        presence_ttl: s.duration("How long a proxy's records live unless it refreshes them (at least 1s).", DEFAULT_PRESENCE_TTL_MS),
      },
      { nullable: true },
    ),
  },
  { nullable: true },
);
