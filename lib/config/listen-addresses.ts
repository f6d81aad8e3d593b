import type { HostPort } from './address.js';
import type { GateConfig, UpstreamProtocol } from './types.js';

/** The platform's legacy per-protocol ports (docs/ARCHITECTURE.md, "The wire contract"), used in separate mode when a key is unset. */
export const LEGACY_PORTS: Record<'web' | UpstreamProtocol, number> = {
  web: 3080,
  ssh: 3023,
  tunnel: 3024,
  kube: 3026,
  mysql: 3036,
  postgres: 5432,
  mongodb: 27017,
  redis: 6379,
  peer: 3021,
};

/** The `proxy_service` key holding each protocol's listen address. */
export const LISTEN_ADDR_KEYS: Record<UpstreamProtocol, string> = {
  ssh: 'listen_addr',
  tunnel: 'tunnel_listen_addr',
  kube: 'kube_listen_addr',
  postgres: 'postgres_listen_addr',
  mysql: 'mysql_listen_addr',
  mongodb: 'mongo_listen_addr',
  redis: 'redis_listen_addr',
  peer: 'peer_listen_addr',
};

/**
 * Proxy peering is not a routable protocol (it has no ALPN of its own: lib/wire/names.ts), so it always needs its
 * own port, in both modes.
 */
export function hasOwnPort(protocol: UpstreamProtocol, config: Pick<GateConfig, 'listenerMode'>): boolean {
  return protocol === 'peer' || config.listenerMode === 'separate';
}

/**
 * Is `protocol` served? Every protocol with an upstream is, and always the reverse tunnel: the
 * proxy hosts agents itself, so `tunnel` needs no upstream. Peering is served by the
 * proxy itself too, when `peer_listen_addr` is set.
 */
export function protocolEnabled(config: Pick<GateConfig, 'proxy'>, protocol: UpstreamProtocol): boolean {
  if (protocol === 'peer') return config.proxy.listenAddrs.peer !== undefined;
  return protocol === 'tunnel' || config.proxy.upstreams[protocol] !== undefined;
}

/**
 * Where the proxy accepts a protocol's traffic, or undefined when the protocol is off (`protocolEnabled`).
 * Multiplex mode: the web address (peering excepted). Separate mode: the configured address, else the
 * web address's host with the legacy port — the web host rather than all interfaces, so that a proxy
 * bound to loopback does not open its other ports to the network by default.
 */
export function listenAddressFor(
  config: Pick<GateConfig, 'listenerMode' | 'proxy'>,
  protocol: 'web' | UpstreamProtocol,
): HostPort | undefined {
  const web = config.proxy.webListenAddr;
  if (protocol === 'web') return web;
  if (!protocolEnabled(config, protocol)) return undefined;
  if (!hasOwnPort(protocol, config)) return web;
  return config.proxy.listenAddrs[protocol] ?? { host: web.host, port: LEGACY_PORTS[protocol] };
}
