/**
 * The wire contract: every name a client, an agent and the proxy must agree on — the ALPN protocol
 * IDs and SNI markers that say which service a connection wants on the shared port, and the web
 * paths agents and updaters call. A leaf module (it imports nothing), so the proxy, the client side
 * and the tunnels all take the names from here and none imports another for them.
 * docs/ARCHITECTURE.md has the table of routes these names select.
 */

/** Web: HTTP/1.1, HTTP/2 and ACME TLS-ALPN-01 challenges (RFC 8737 §6.2) all go to the web server. */
export const ALPN_WEB = ['http/1.1', 'h2', 'acme-tls/1'] as const;
/** SSH carried inside TLS. */
export const ALPN_SSH = 'gate-proxy-ssh';
/** An agent's reverse tunnel, in gate-mux's tunnel framing (docs/tunnel-framing.md). */
export const ALPN_REVERSE_TUNNEL_FRAMED = 'gate-reversetunnel-framed';
export const ALPN_POSTGRES = 'gate-postgres';
/** PostgreSQL 17 direct SSL negotiation (`sslnegotiation=direct`) requires this ALPN. */
export const ALPN_POSTGRES_DIRECT = 'postgresql';
export const ALPN_MYSQL = 'gate-mysql';
/** `gate-mysql-<base64 server version>`: the client asks for a given MySQL server version string. */
export const ALPN_MYSQL_VERSION_PREFIX = 'gate-mysql-';
export const ALPN_MONGODB = 'gate-mongodb';
export const ALPN_REDIS = 'gate-redis';

/** Kubernetes clients mark the SNI with this prefix; their TLS is passed through, not terminated. */
export const SNI_KUBE_PREFIX = 'kube-gate-proxy-alpn.';
/** The proxy's own Kubernetes server name. */
export const SNI_KUBE_LOCAL = 'kube.gate.cluster.local';

/** The web endpoint that describes the proxy's listeners (JSON). */
export const PING_PATH = '/webapi/ping';
/** Path prefix of the automatic-upgrade channels: `<prefix>/<channel name>/<verb>`. */
export const CHANNEL_PATH_PREFIX = '/v1/webapi/automaticupgrades/channel';
/** The channel verbs: the version to run, and whether it is critical (`yes` / `no`). */
export const CHANNEL_VERB_VERSION = 'version';
export const CHANNEL_VERB_CRITICAL = 'critical';
/**
 * The cluster's maintenance schedule (a `cluster_maintenance_config` document, YAML), which
 * `gate-upgrade export-schedule` writes where the updater reads it.
 */
export const MAINTENANCE_SCHEDULE_PATH = '/v1/webapi/automaticupgrades/schedule';

/**
 * `-ping` variants: the stream is framed as uint32 big-endian length + payload, a zero length being a
 * keep-alive ping, so idle database connections survive load balancers' idle timeouts.
 */
export const PING_SUFFIX = '-ping';

export function pingAlpn(alpn: string): string {
  return `${alpn}${PING_SUFFIX}`;
}

/** True when a negotiated ALPN asks for the ping framing. */
export function isPingAlpn(alpn: string | undefined): boolean {
  return alpn?.endsWith(PING_SUFFIX) === true;
}

/**
 * The MySQL server version a `gate-mysql-<base64>` ALPN asks for (its `-ping` suffix, if any, set
 * aside), or undefined for plain `gate-mysql`, the ping variant, or a suffix that is not canonical
 * base64 of printable ASCII.
 */
export function mysqlVersionFromAlpn(alpn: string): string | undefined {
  if (!alpn.startsWith(ALPN_MYSQL_VERSION_PREFIX)) return undefined;
  let encoded = alpn.slice(ALPN_MYSQL_VERSION_PREFIX.length);
  if (encoded === 'ping') return undefined;
  if (encoded.endsWith(PING_SUFFIX)) encoded = encoded.slice(0, -PING_SUFFIX.length);
  if (encoded === '' || !/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return undefined;
  const decoded = Buffer.from(encoded, 'base64');
  // Canonical only: re-encoding must give the same text (Buffer.from ignores stray bits).
  if (decoded.toString('base64').replace(/=+$/, '') !== encoded.replace(/=+$/, '')) return undefined;
  const version = decoded.toString('latin1');
  return /^[\x20-\x7e]+$/.test(version) ? version : undefined;
}

/** The ALPN a client sends to ask for a MySQL server version (inverse of `mysqlVersionFromAlpn`). */
export function mysqlVersionAlpn(version: string): string {
  return `${ALPN_MYSQL_VERSION_PREFIX}${Buffer.from(version, 'latin1').toString('base64')}`;
}

/**
 * Agent joining, on the web port. `GET` the CA path: the cluster CA (PEM), which the agent checks
 * against its pin before trusting anything. `POST` the join path with `{token, name, csr}` (JSON):
 * a short-lived client certificate for `name`. `POST` the renew path with `{csr}` over mutual TLS
 * with the current certificate (no token): a fresh one for the same name.
 */
export const AGENT_CA_PATH = '/v1/webapi/agents/ca';
export const AGENT_JOIN_PATH = '/v1/webapi/agents/join';
export const AGENT_RENEW_PATH = '/v1/webapi/agents/renew';

/**
 * Proxy peering, on `peer_listen_addr` only: mutual TLS between proxies of one cluster with this
 * ALPN, then gate-mux's tunnel framing (docs/tunnel-framing.md) in which the dialling proxy opens
 * one stream per forwarded client connection, each OPEN naming the agent, the target and the client.
 */
export const ALPN_PEER_FRAMED = 'gate-proxy-peer-framed';
/**
 * The role a proxy's peering certificate carries as a URI subjectAltName, and agent and client
 * certificates never do: the cluster CA signs all three, so the chain alone cannot tell a proxy.
 */
export const PEER_ROLE_URI = 'urn:gate-mux:role:proxy';

/**
 * TLS routing through a load balancer that ends TLS itself (an L7 balancer: AWS ALB, GCP,
 * Cloudflare, HAProxy or nginx in HTTP mode), which strips the client's SNI, ALPN and client
 * certificate. The client asks for a WebSocket upgrade (RFC 6455) on this path, on the web
 * port, and then runs its real TLS handshake inside the WebSocket's binary messages; the proxy
 * routes that inner handshake as if it had arrived on the port.
 */
export const CONNECTION_UPGRADE_PATH = '/webapi/connectionupgrade';
/** The `Sec-WebSocket-Protocol` asking for the byte stream alone. */
export const UPGRADE_PROTOCOL_ALPN = 'alpn';
/** The same, with WebSocket pings from the proxy, so a balancer's idle timeout never cuts a quiet stream. */
export const UPGRADE_PROTOCOL_ALPN_PING = 'alpn-ping';
/** Every sub-protocol the proxy answers, the client's preferred first. */
export const UPGRADE_PROTOCOLS = [UPGRADE_PROTOCOL_ALPN_PING, UPGRADE_PROTOCOL_ALPN] as const;
/**
 * Forces the upgrade on (`true`) or off (`false`) for every proxy address, or on for the listed
 * `host:port` addresses (comma-separated) and by detection for the rest; unset: by detection.
 */
export const TLS_ROUTING_UPGRADE_ENV = 'GATE_TLS_ROUTING_UPGRADE';

/**
 * The admin endpoint (`gate-mux create`, `get`, `rm`, `status`, `users`, `inventory ls`) on the
 * web port: `<prefix><operation>`, over mutual TLS with an admin identity (below).
 */
export const ADMIN_PATH_PREFIX = '/v1/admin/';
/**
 * The URI subjectAltName of an admin identity with full permissions: what `gate-mux` makes for
 * itself on a proxy's host from the cluster CA's key in data_dir (whoever can read that key can
 * sign anything anyway). The proxy never issues it: the CA sets every extension of what it signs.
 */
export const ADMIN_LOCAL_URI = 'urn:gate-mux:admin:local';
/** `<prefix><user>:<identity id>`: a user's identity, which `gate-mux users add` issues; the id changes with each `users add`. */
export const ADMIN_USER_URI_PREFIX = 'urn:gate-mux:user:';

/**
 * Managed rollouts (docs/updates.md, "Rollouts"): an updater asks
 * `GET <FIND_PATH>?host=<server id>&group=<update group>` (no authentication) which version its
 * agent should run now and whether to install it now. The answer is JSON:
 * `{"auto_update":{"managed":bool,"agent_version":"1.3.0","agent_auto_update":bool,"reason":"..."}}`;
 * with `managed: false` (no `autoupdate_config`, or its mode disabled) the updater uses its channel.
 */
export const FIND_PATH = '/v1/webapi/find';
/** The update group of an agent whose agent.yaml names none. */
export const DEFAULT_UPDATE_GROUP = 'default';
/** An update group's name: letters, digits, `.`, `_`, `-`, at most 64, starting and ending with a letter or digit. */
const UPDATE_GROUP = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$/;

export function isValidUpdateGroup(name: string): boolean {
  return UPDATE_GROUP.test(name);
}
