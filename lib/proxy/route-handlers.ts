import { ErrorCodes, GateError } from '../errors.js';
import type { Server } from 'node:net';
import { forward, select, serve, terminate, wrap } from '../handlers/builders.js';
import { PingFramedStream } from '../length-prefix/ping-stream.js';
import type { Handler, TerminateHandler } from '../handlers/types.js';
import type { Route, RouteMatch } from '../mux/types.js';
import { isPingAlpn } from '../wire/names.js';
import type { ProxyCertificates } from './certificates.js';
import type { RouteSpec } from './listener-plan.js';
import { isAgentUpstream } from '../config/types.js';
import type { HostPort } from '../config/address.js';
import { formatHostPort } from '../client/target.js';
import { forwardThroughProxy, kubeUpstreamProxy } from './env-proxy-upstream.js';
import { tunnelEndpoint } from '../tunnel/endpoint.js';
import type { TunnelRegistry } from '../tunnel/registry.js';
import { viaTunnel, type TunnelStreamOpener } from '../tunnel/via-tunnel.js';
import { refusalForRoute } from '../refusals/protocols.js';
import type { PeerServer } from '../cluster/peer-server.js';

/** The servers the proxy answers web traffic with itself. */
export interface WebServers {
  /** Terminates TLS itself (h2 and http/1.1 by ALPN). */
  secure: Server;
  /** Plaintext HTTP/1.x. */
  http1: Server;
  /** Plaintext HTTP/2 with prior knowledge (h2c preface). */
  h2c: Server;
}

function list(value: string | string[] | undefined): string[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/**
 * The ALPN a terminating route answers with: the client's most preferred protocol that the
 * route's match accepts (a versioned `gate-mysql-<v>` included), so the client sees the
 * protocol it asked for, and refuses (no_application_protocol) when there is none.
 */
function alpnChooser(match: RouteMatch): TerminateHandler['tls']['selectAlpn'] {
  const exact = new Set(list(match.alpn));
  const prefixes = list(match.alpnPrefix);
  if (exact.size === 0 && prefixes.length === 0) return (offered) => offered[0]; // any: a database port
  return (offered) => offered.find((p) => exact.has(p) || prefixes.some((prefix) => p.startsWith(prefix)));
}

/** `forward` (the fast path), unless the environment routes this protocol's target through a proxy. */
function directOrProxied(spec: RouteSpec, upstream: HostPort, env: NodeJS.ProcessEnv | undefined): Handler {
  const target = formatHostPort(upstream.host, upstream.port);
  const via = ENV_PROXY_PROTOCOLS.has(spec.protocol) ? kubeUpstreamProxy(upstream, env ?? process.env) : undefined;
  return via
    ? forwardThroughProxy(target, via)
    : forward({ host: upstream.host, port: upstream.port }, { refusal: refusalForRoute(spec.protocol) ?? 'none' });
}

function framed(spec: RouteSpec, inner: Handler): Handler {
  const pingWrap = wrap((socket) => new PingFramedStream(socket), inner);
  switch (spec.framing) {
    case 'raw':
      return inner;
    case 'ping':
      return pingWrap;
    case 'per-alpn':
      return select((info) => (isPingAlpn(info.negotiatedAlpn) ? pingWrap : inner));
  }
}

export interface RouteForOptions {
  /** Hosts agents: the tunnel route registers them, `tunnel:<agent>/<host:port>` upstreams use them. */
  tunnels?: TunnelRegistry;
  /** Where HTTPS_PROXY / NO_PROXY come from for the dials that honour them (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /**
   * How `tunnel:<agent>/<host:port>` upstreams open their streams (this proxy's tunnel,
   * then the other proxies holding one); default this proxy's tunnels only.
   */
  openTunnel?: TunnelStreamOpener;
  /** Serves the peer route; without it the peer route is a configuration error. */
  peering?: PeerServer;
  /** What a `tunnel:` route's failure is told as (an agent refused for its version, not "offline"). */
  explainTunnelFailure?: (agent: string, error: GateError) => GateError;
}

/**
 * Which upstream dials honour the environment proxy: Kubernetes only. The platform's proxy reaches
 * a Kubernetes API through HTTPS_PROXY like any HTTPS client it makes (its kube forwarder is an
 * HTTP client), and says a local cluster "may fail unless kube.gate.cluster.local is in NO_PROXY".
 * Database and SSH upstreams are raw TCP the platform dials directly,
 * as gate-mux does on its fast path.
 */
const ENV_PROXY_PROTOCOLS: ReadonlySet<string> = new Set(['kube']);

function explainFor(explain: (agent: string, error: GateError) => GateError, agent: string): (error: GateError) => GateError {
  return (error) => explain(agent, error);
}

/**
 * Turns one planned route into a multiplexer route with its handler. Without `tunnels`, the tunnel
 * route and `tunnel:` upstreams are configuration errors.
 */
export function routeFor(spec: RouteSpec, certificates: ProxyCertificates, web: WebServers, options: RouteForOptions = {}): Route {
  const { tunnels } = options;
  const tls = (match: RouteMatch): TerminateHandler['tls'] => ({
    ...certificates.default,
    sniCertificates: certificates.bySni,
    selectAlpn: alpnChooser(match),
  });
  const needTunnels = (): TunnelRegistry => {
    if (!tunnels) throw new GateError(ErrorCodes.CONFIG_INVALID, `route ${spec.name} needs the proxy's tunnel registry`);
    return tunnels;
  };
  const upstream =
    spec.upstream &&
    (isAgentUpstream(spec.upstream)
      ? viaTunnel(needTunnels(), spec.upstream.agent, spec.upstream.target, {
          ...(options.openTunnel ? { open: options.openTunnel } : {}),
          // The route's protocol is known even where the connection does not show it (a MySQL
          // client on its own port sends nothing; TLS on a database port may carry no ALPN).
          refusal: refusalForRoute(spec.protocol) ?? 'none',
          ...(options.explainTunnelFailure ? { explain: explainFor(options.explainTunnelFailure, spec.upstream.agent) } : {}),
        })
      : directOrProxied(spec, spec.upstream, options.env));
  let handler: Handler;
  if (spec.protocol === 'tunnel') {
    // Agents trust the cluster CA (pinned when they joined), so the tunnel route always presents
    // the cluster CA's server certificate, whatever https_keypairs gives the web port.
    handler = tunnelEndpoint(needTunnels(), {
      ...certificates.clusterServer,
      ca: certificates.clusterCa.cert,
    });
  } else if (spec.protocol === 'peer') {
    if (!options.peering) throw new GateError(ErrorCodes.CONFIG_INVALID, `route ${spec.name} needs the proxy's peering server`);
    // Proxies trust the cluster CA and show their peering certificates (the proxy role) both ways.
    handler = options.peering.endpoint({ ...certificates.peer, ca: certificates.clusterCa.cert });
  } else if (spec.protocol === 'web') {
    handler = spec.transport === 'plaintext' ? select((info) => serve(info.protocol === 'h2' ? web.h2c : web.http1)) : serve(web.secure);
  } else if (!upstream) {
    throw new GateError(ErrorCodes.CONFIG_INVALID, `route ${spec.name} has no upstream`);
  } else {
    switch (spec.transport) {
      case 'tls-passthrough':
      case 'plaintext':
        handler = upstream;
        break;
      case 'tls-terminate':
        handler = terminate(tls(spec.match), framed(spec, upstream));
        break;
      case 'tls-if-sslrequest': {
        // After an SSLRequest the client starts TLS (answered 'S'); a plaintext StartupMessage or
        // CancelRequest goes to the upstream as it is.
        const terminated = terminate(tls({}), framed(spec, upstream));
        handler = select((info) => (info.postgresSslRequest ? terminated : upstream));
        break;
      }
    }
  }
  return { name: spec.name, match: spec.match, handler };
}
