import { terminate } from '../handlers/builders.js';
import type { TerminateHandler } from '../handlers/types.js';
import type { Route } from '../mux/types.js';
import { ALPN_REVERSE_TUNNEL_FRAMED } from '../wire/names.js';
import type { TunnelRegistry } from './registry.js';

export interface TunnelEndpointTls {
  /** The proxy's certificate and key for the tunnel route. */
  cert: string | Buffer;
  key: string | Buffer;
  /** CA(s) whose client certificates identify agents. */
  ca: string | Buffer | Array<string | Buffer>;
  sniCertificates?: TerminateHandler['tls']['sniCertificates'];
  handshakeTimeoutMs?: number;
}

/**
 * The tunnel route's handler: TLS ends here with a client certificate requested (mutual TLS: the
 * certificate is the agent's identity) and ALPN `gate-reversetunnel-framed` (gate-mux's tunnel
 * framing), then the registry takes the socket. OpenSSL verifies the certificate against `ca` but
 * does not abort the handshake itself
 * (`rejectUnauthorized: false`): the registry refuses an unverified one with a code saying why
 * (foreign CA, expired, revoked, duplicate name) and tells the agent, instead of one opaque alert.
 */
export function tunnelEndpoint(registry: TunnelRegistry, tls: TunnelEndpointTls): TerminateHandler {
  return terminate(
    {
      cert: tls.cert,
      key: tls.key,
      ca: tls.ca,
      ...(tls.sniCertificates ? { sniCertificates: tls.sniCertificates } : {}),
      ...(tls.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: tls.handshakeTimeoutMs }),
      alpnProtocols: [ALPN_REVERSE_TUNNEL_FRAMED],
      requestCert: true,
      rejectUnauthorized: false,
    },
    registry.handler(),
  );
}

/** The route for a multiplexer: the tunnel's ALPN over TLS, to `tunnelEndpoint`. */
export function tunnelRoute(registry: TunnelRegistry, tls: TunnelEndpointTls, name = 'tunnel'): Route {
  return { name, match: { alpn: ALPN_REVERSE_TUNNEL_FRAMED, protocol: 'tls' }, handler: tunnelEndpoint(registry, tls) };
}
