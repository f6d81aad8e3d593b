import type { Duplex } from 'node:stream';
import { dial } from '../client/dial.js';
import type { ProxyConfig } from '../client/proxy-config.js';
import { proxyForTarget } from '../client/resolve-proxy.js';
import { formatHostPort } from '../client/target.js';
import type { HostPort } from '../config/address.js';
import { SNI_KUBE_LOCAL } from '../wire/names.js';
import { ErrorCodes, GateError, isGateError } from '../errors.js';
import type { CustomHandler } from '../handlers/types.js';
import { dialThenRelay } from '../transport/dial-then-relay.js';
import { splice } from '../transport/splice.js';

/**
 * The environment proxy for the Kubernetes upstream, or undefined to dial it directly. NO_PROXY
 * keeps it direct when it names the upstream's own host:port, as for any dial, and also when it
 * names kube.gate.cluster.local (on the upstream's port, or any port): the platform's proxy knows
 * its local cluster by that name, and its document tells operators to list it in NO_PROXY.
 */
export function kubeUpstreamProxy(upstream: HostPort, env: NodeJS.ProcessEnv): ProxyConfig | undefined {
  if (!proxyForTarget(`${SNI_KUBE_LOCAL}:${upstream.port}`, env)) return undefined;
  return proxyForTarget(formatHostPort(upstream.host, upstream.port), env);
}

/**
 * An upstream the environment says to reach through a proxy (HTTPS_PROXY and NO_PROXY, the rules
 * `proxyForTarget` applies to every dial): the client is held paused while `dial` goes through
 * `via` (CONNECT or SOCKS), then spliced to the tunnelled socket. A failed dial closes the client
 * with the dialer's code (GATE_ERR_PROXY_UNREACHABLE, GATE_ERR_PROXY_FORBIDDEN, ...), which the
 * listener logs once with the route.
 */
export function forwardThroughProxy(target: string, via: ProxyConfig, options: { timeoutMs?: number } = {}): CustomHandler {
  return {
    kind: 'custom',
    handle: (client: Duplex) =>
      dialThenRelay(client, {
        dial: async (cancel) => {
          const timeout = options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs };
          return (await dial(target, { proxy: via, allowHalfOpen: true, signal: cancel.signal, ...timeout })).socket;
        },
        release: (socket) => socket.destroy(),
        fail: (err) => {
          const message = `${target} via ${via.display}: ${(err as Error).message}`;
          client.destroy(isGateError(err) ? err : new GateError(ErrorCodes.DIAL_FAILED, message, { cause: err }));
        },
        relay: (socket) => {
          socket.setNoDelay(true);
          splice(client, socket, () => {});
          client.resume();
        },
      }),
  };
}
