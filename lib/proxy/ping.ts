import { formatAddress, type HostPort } from '../config/address.js';
import { protocolEnabled } from '../config/listen-addresses.js';
import type { GateConfig, UpstreamProtocol } from '../config/types.js';
import type { PingResponse } from '../web/ping.js';
import type { ListenerPlan } from './listener-plan.js';

function first(addresses: HostPort[]): string | undefined {
  const [head] = addresses;
  return head ? formatAddress(head) : undefined;
}

/** Copy without undefined fields, so JSON and deep-equality both see "left out". */
function compact<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Builds the ping answer from the configuration and the listener plan. Listen addresses come from
 * the plan, so a caller that bound port 0 can pass a plan holding the real ports. With TLS routing
 * (multiplex) every listen address is the web address. Public addresses: the first of each list.
 */
export function buildPing(config: GateConfig, plan: ListenerPlan, serverVersion: string): PingResponse {
  const tlsRouting = plan.mode === 'multiplex';
  const shared = plan.listeners.find((l) => l.name === (tlsRouting ? 'multiplex' : 'web'));
  const webAddress = shared ? formatAddress(shared) : formatAddress(config.proxy.webListenAddr);
  const enabled = (protocol: UpstreamProtocol): boolean => protocolEnabled(config, protocol);
  const listenOf = (protocol: UpstreamProtocol): string | undefined => {
    if (!enabled(protocol)) return undefined;
    if (tlsRouting) return webAddress;
    const own = plan.listeners.find((l) => l.name === protocol);
    return own ? formatAddress(own) : undefined;
  };
  const p = config.proxy;
  return {
    proxy: {
      kube: compact({ enabled: enabled('kube'), public_addr: first(p.kubePublicAddrs), listen_addr: listenOf('kube') }),
      ssh: compact({
        listen_addr: listenOf('ssh'),
        tunnel_listen_addr: listenOf('tunnel'),
        web_listen_addr: webAddress,
        public_addr: first(p.publicAddrs),
        ssh_public_addr: first(p.sshPublicAddrs),
        ssh_tunnel_public_addr: first(p.tunnelPublicAddrs),
      }),
      db: compact({
        postgres_listen_addr: listenOf('postgres'),
        postgres_public_addr: first(p.postgresPublicAddrs),
        mysql_listen_addr: listenOf('mysql'),
        mysql_public_addr: first(p.mysqlPublicAddrs),
        mongo_listen_addr: listenOf('mongodb'),
      }),
      tls_routing_enabled: tlsRouting,
    },
    server_version: serverVersion,
  };
}
