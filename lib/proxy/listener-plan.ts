import { LISTEN_ADDR_KEYS, hasOwnPort, listenAddressFor, protocolEnabled } from '../config/listen-addresses.js';
import { UPSTREAM_PROTOCOLS, type GateConfig, type Upstream, type ProxyProtocolName, type UpstreamProtocol } from '../config/types.js';
import type { RouteMatch } from '../mux/types.js';
import {
  ALPN_MONGODB,
  ALPN_MYSQL,
  ALPN_MYSQL_VERSION_PREFIX,
  ALPN_PEER_FRAMED,
  ALPN_POSTGRES,
  ALPN_POSTGRES_DIRECT,
  ALPN_REDIS,
  ALPN_REVERSE_TUNNEL_FRAMED,
  ALPN_SSH,
  ALPN_WEB,
  SNI_KUBE_LOCAL,
  SNI_KUBE_PREFIX,
  pingAlpn,
} from '../wire/names.js';

/**
 * Pure: configuration → the listeners to open and, on each, the routes to recognise. The caller turns
 * each RouteSpec into a multiplexer Route by attaching a handler chosen from `transport`, `framing` and
 * `upstream`; nothing here opens sockets.
 */

/** How a route's bytes reach the upstream. */
export type RouteTransport =
  /** TLS ends at the proxy (per-route certificates); the cleartext stream is forwarded or served. */
  | 'tls-terminate'
  /** TLS bytes go to the upstream untouched (Kubernetes: the upstream holds the certificate). */
  | 'tls-passthrough'
  /** No TLS: the plaintext stream is forwarded (or served, for web) as it arrived. */
  | 'plaintext'
  /**
   * Detected protocol `postgres`: TLS to terminate when `ConnectionInfo.postgresSslRequest` (the
   * multiplexer answered the SSLRequest 'S'), else a plaintext StartupMessage/CancelRequest.
   */
  | 'tls-if-sslrequest';

/**
 * Stream framing after TLS. `ping`: uint32 big-endian length + payload, zero length a keep-alive
 * (the `-ping` ALPN variants). `per-alpn`: decide per connection with `isPingAlpn(negotiatedAlpn)`.
 */
export type RouteFraming = 'raw' | 'ping' | 'per-alpn';

export interface RouteSpec {
  /** Unique within its listener, e.g. `postgres-ping`; the multiplexer route name. */
  name: string;
  protocol: ProxyProtocolName;
  match: RouteMatch;
  transport: RouteTransport;
  framing: RouteFraming;
  /**
   * Where to send the traffic: an address, or a target behind an agent's tunnel; undefined for web,
   * the tunnel route and peering, which the proxy serves itself.
   */
  upstream: Upstream | undefined;
}

export interface ListenerSpec {
  /** `multiplex` for the shared port, else the protocol whose port it is (`web` in separate mode). */
  name: string;
  /** The configuration key the address comes from, for messages. */
  configKey: string;
  host: string;
  port: number;
  /**
   * In declaration order, which is the multiplexer's last tie-break (after SNI tier and the client's
   * ALPN preference): exact ALPN routes come before prefix ones. Names are unique per listener, not
   * across listeners: one Multiplexer (route table) per listener.
   */
  routes: RouteSpec[];
  /** Route taken when the client sends nothing for `silentAfterMs` (server-speaks-first protocols). */
  silentRoute?: string;
  /**
   * Milliseconds of silence before `silentRoute`. 0 means "do not wait for the client at all": the
   * connection is forwarded at once (after any PROXY header), because on a port of its own a
   * server-speaks-first protocol such as MySQL (its server sends the handshake first, MySQL protocol
   * "Connection Phase") has nothing to detect.
   */
  silentAfterMs?: number;
}

export interface ListenerPlan {
  mode: GateConfig['listenerMode'];
  listeners: ListenerSpec[];
}

/**
 * On a dedicated SSH port, a client that waits for the server's identification string first
 * (RFC 4253 §4.2 lets either side send first) is routed to SSH after this much silence.
 */
export const SSH_PORT_SILENT_AFTER_MS = 500;

type Alternative = Omit<RouteSpec, 'upstream' | 'protocol'>;

/**
 * How each protocol is recognised on a port shared with others (TLS routing), in declaration order.
 * TLS conditions carry `protocol: 'tls'` except Postgres's: the route table lets an SNI/ALPN route
 * also match TLS that followed a Postgres SSLRequest (detected protocol `postgres`), which only the
 * Postgres routes should take.
 */
function sharedPortAlternatives(protocol: ProxyProtocolName, withPlaintext: boolean): Alternative[] {
  const tls = (name: string, match: RouteMatch, framing: RouteFraming = 'raw'): Alternative => ({
    name,
    match: { ...match, protocol: 'tls' },
    transport: 'tls-terminate',
    framing,
  });
  const plain = (name: string, match: RouteMatch): Alternative => ({
    name,
    match,
    transport: 'plaintext',
    framing: 'raw',
  });
  switch (protocol) {
    case 'web':
      return [
        tls('web', { alpn: [...ALPN_WEB] }),
        ...(withPlaintext ? [plain('web-plaintext', { protocol: ['http1', 'h2'] })] : []),
        // The TLS protocol default: no ALPN, or only ALPNs no route claims. The web server's own ALPN
        // list then refuses unknown ones with no_application_protocol (RFC 7301 §3.2).
        tls('web-default-tls', {}),
      ];
    case 'ssh':
      return [tls('ssh-tls', { alpn: ALPN_SSH }), ...(withPlaintext ? [plain('ssh', { protocol: 'ssh' })] : [])];
    case 'tunnel':
      return [tls('tunnel', { alpn: ALPN_REVERSE_TUNNEL_FRAMED })];
    case 'kube':
      return [
        { name: 'kube', match: { sniPrefix: SNI_KUBE_PREFIX, protocol: 'tls' }, transport: 'tls-passthrough', framing: 'raw' },
        { name: 'kube-local', match: { sni: SNI_KUBE_LOCAL, protocol: 'tls' }, transport: 'tls-passthrough', framing: 'raw' },
      ];
    case 'postgres':
      return [
        // No `protocol`: the route table reads ALPN routes as ['tls', 'postgres'], so PG17 libpq's
        // SSLRequest + ALPN `postgresql` and direct SSL both land here; the caller terminates TLS.
        { name: 'postgres', match: { alpn: [ALPN_POSTGRES, ALPN_POSTGRES_DIRECT] }, transport: 'tls-terminate', framing: 'raw' },
        { name: 'postgres-ping', match: { alpn: pingAlpn(ALPN_POSTGRES) }, transport: 'tls-terminate', framing: 'ping' },
        ...(withPlaintext
          ? [
              // Any other Postgres client: SSLRequest then TLS without ALPN (libpq before 17), or plaintext.
              {
                name: 'postgres-startup',
                match: { protocol: 'postgres' },
                transport: 'tls-if-sslrequest',
                framing: 'raw',
              } satisfies Alternative,
            ]
          : []),
      ];
    case 'mysql':
      return [
        tls('mysql', { alpn: ALPN_MYSQL }),
        // Declared before the prefix route: `gate-mysql-ping` also starts with `gate-mysql-`, and on
        // an ALPN tie the route table keeps the first declared.
        tls('mysql-ping', { alpn: pingAlpn(ALPN_MYSQL) }, 'ping'),
        tls('mysql-versioned', { alpnPrefix: ALPN_MYSQL_VERSION_PREFIX }, 'per-alpn'),
      ];
    case 'mongodb':
      return [tls('mongodb', { alpn: ALPN_MONGODB }), tls('mongodb-ping', { alpn: pingAlpn(ALPN_MONGODB) }, 'ping')];
    case 'redis':
      return [tls('redis', { alpn: ALPN_REDIS }), tls('redis-ping', { alpn: pingAlpn(ALPN_REDIS) }, 'ping')];
    case 'peer':
      // Peering has no ALPN of its own: it only ever has a port to itself.
      return [];
  }
}

/** How each protocol is recognised on a port of its own (separate mode, and peering). */
function ownPortAlternatives(protocol: UpstreamProtocol): { routes: Alternative[]; silent?: { route: string; afterMs: number } } {
  const passthrough = (name: string): Alternative => ({
    name,
    match: { protocol: 'tls' },
    transport: 'tls-passthrough',
    framing: 'raw',
  });
  // Database ports accept any ALPN (or none): a `-ping` ALPN still selects the ping framing.
  const terminate = (name: string, match: RouteMatch = { protocol: 'tls' }, framing: RouteFraming = 'per-alpn'): Alternative => ({
    name,
    match,
    transport: 'tls-terminate',
    framing,
  });
  switch (protocol) {
    case 'ssh':
      return {
        routes: [{ name: 'ssh', match: { protocol: 'ssh' }, transport: 'plaintext', framing: 'raw' }],
        silent: { route: 'ssh', afterMs: SSH_PORT_SILENT_AFTER_MS },
      };
    case 'tunnel':
      // Agents dial in with TLS, the tunnel's ALPN and their client certificate; the proxy ends the
      // TLS itself and hosts the tunnel, so there is no plaintext route.
      return { routes: [terminate('tunnel', { alpn: ALPN_REVERSE_TUNNEL_FRAMED }, 'raw')] };
    case 'kube':
      return { routes: [passthrough('kube')] };
    case 'postgres':
      return {
        routes: [
          // SSLRequest (answered 'S' by the multiplexer) then TLS, or a plaintext StartupMessage.
          { name: 'postgres', match: { protocol: 'postgres' }, transport: 'tls-if-sslrequest', framing: 'per-alpn' },
          // PostgreSQL 17 direct SSL (`sslnegotiation=direct`): a ClientHello straight away.
          terminate('postgres-tls'),
        ],
      };
    case 'mysql':
      return {
        routes: [{ name: 'mysql', match: { protocol: 'silent' }, transport: 'plaintext', framing: 'raw' }],
        silent: { route: 'mysql', afterMs: 0 },
      };
    case 'mongodb':
      return { routes: [terminate('mongodb')] };
    case 'redis':
      return { routes: [terminate('redis')] };
    case 'peer':
      // The proxy's own peering server: mutual TLS between proxies, ended here.
      return { routes: [{ name: 'peer', match: { alpn: ALPN_PEER_FRAMED, protocol: 'tls' }, transport: 'tls-terminate', framing: 'raw' }] };
  }
}

/** The matches recognising `protocol` on a shared (TLS routing) port, in declaration order. */
export function routeMatchesFor(protocol: ProxyProtocolName, options: { plaintext?: boolean } = {}): RouteMatch[] {
  if (protocol === 'peer') return [{ alpn: ALPN_PEER_FRAMED, protocol: 'tls' }];
  return sharedPortAlternatives(protocol, options.plaintext ?? true).map((a) => a.match);
}

/**
 * The primary match for a protocol on the shared port: its TLS ALPN (or kube's SNI prefix). Other
 * ways to reach it (plaintext greeting, `-ping` ALPN, versioned MySQL ALPN) are in `routeMatchesFor`.
 */
export function routeMatchFor(protocol: ProxyProtocolName): RouteMatch {
  const [first] = routeMatchesFor(protocol);
  // Every protocol has at least one alternative; the fallback keeps the type total.
  return first ?? { protocol: 'tls' };
}

function enabledProtocols(config: GateConfig): UpstreamProtocol[] {
  return UPSTREAM_PROTOCOLS.filter((p) => protocolEnabled(config, p));
}

/**
 * The listeners a configuration asks for. Multiplex: one `multiplex` listener on web_listen_addr
 * with every enabled protocol's routes (TLS by SNI/ALPN; plaintext SSH, HTTP and Postgres by
 * greeting). Separate: a `web` listener that still routes TLS by SNI/ALPN for every enabled protocol
 * (plaintext HTTP only), plus one listener per enabled protocol on its own port. Peering always has
 * its own port. A protocol without an upstream gets no route at all, so its clients fail closed.
 */
export function planListeners(config: GateConfig): ListenerPlan {
  const multiplex = config.listenerMode === 'multiplex';
  const enabled = enabledProtocols(config);
  const web = config.proxy.webListenAddr;

  const sharedRoutes: RouteSpec[] = [];
  for (const protocol of ['web', ...enabled] as ProxyProtocolName[]) {
    const upstream = protocol === 'web' ? undefined : config.proxy.upstreams[protocol];
    for (const alternative of sharedPortAlternatives(protocol, multiplex || protocol === 'web')) {
      sharedRoutes.push({ ...alternative, protocol, upstream });
    }
  }
  // The route table ranks by SNI tier and ALPN preference; declaration order only breaks ties.
  // The TLS default goes last so the list reads in the order a client is matched.
  sharedRoutes.sort((a, b) => Number(a.name === 'web-default-tls') - Number(b.name === 'web-default-tls'));

  const listeners: ListenerSpec[] = [
    { name: multiplex ? 'multiplex' : 'web', configKey: 'proxy_service.web_listen_addr', ...web, routes: sharedRoutes },
  ];
  for (const protocol of enabled) {
    if (!hasOwnPort(protocol, config)) continue;
    const address = listenAddressFor(config, protocol);
    if (!address) continue;
    const upstream = config.proxy.upstreams[protocol];
    const own = ownPortAlternatives(protocol);
    const listener: ListenerSpec = {
      name: protocol,
      configKey: `proxy_service.${LISTEN_ADDR_KEYS[protocol]}`,
      host: address.host,
      port: address.port,
      routes: own.routes.map((alternative) => ({ ...alternative, protocol, upstream })),
    };
    if (own.silent) {
      listener.silentRoute = own.silent.route;
      listener.silentAfterMs = own.silent.afterMs;
    }
    listeners.push(listener);
  }
  return { mode: config.listenerMode, listeners };
}
