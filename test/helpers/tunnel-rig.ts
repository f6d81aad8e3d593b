import { EventEmitter } from 'node:events';
import type { TLSSocket } from 'node:tls';
import { dialTls } from '../../lib/client/dial-tls.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import type { OpenPayload } from '../../lib/tunnel-framing/frames.js';
import { ALPN_REVERSE_TUNNEL_FRAMED } from '../../lib/wire/names.js';
import type { Teardownable } from './daemon.js';
import { terminate } from '../../lib/handlers/builders.js';
import type { Route } from '../../lib/mux/types.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import type { KeyPair } from '../../lib/pki/certificate-authority.js';
import { TunnelRegistry, type TunnelRegistryOptions } from '../../lib/tunnel/registry.js';
import { tunnelRoute } from '../../lib/tunnel/endpoint.js';
import { viaTunnel } from '../../lib/tunnel/via-tunnel.js';

/** One client-facing route: clients offering `alpn` reach `target` through agent `agent`. */
export interface TunnelledRoute {
  alpn: string;
  agent: string;
  target: string;
}

export interface ProxySide {
  port: number;
  registry: TunnelRegistry;
  mux: Multiplexer;
  /** Closes the listener and destroys every connection and agent session at once (a proxy crash or restart). */
  close(): Promise<void>;
}

const agentCerts = new Map<string, KeyPair>();

/** A client certificate for agent `name` from the dev CA, issued once per process. */
export function agentCertificate(name: string): KeyPair {
  let pair = agentCerts.get(name);
  if (!pair) {
    pair = devCertificates().ca.issue({ commonName: name, usage: 'client' });
    agentCerts.set(name, pair);
  }
  return pair;
}

/**
 * The proxy side of a tunnel test: a Multiplexer on 127.0.0.1:`port` (0: any) with the tunnel route
 * (mTLS against the dev CA) and one TLS-terminating route per `routes` entry whose upstream is
 * reached through an agent.
 */
export async function startProxySide(
  routes: TunnelledRoute[],
  options: { port?: number; registry?: TunnelRegistryOptions } = {},
): Promise<ProxySide> {
  const { ca, server } = devCertificates();
  const registry = new TunnelRegistry(options.registry ?? {});
  const all: Route[] = [
    tunnelRoute(registry, { cert: server.cert, key: server.key, ca: ca.cert }),
    ...routes.map((r) => ({
      name: `${r.alpn}-via-${r.agent}`,
      match: { alpn: r.alpn },
      handler: terminate({ ...server, alpnProtocols: [r.alpn] }, viaTunnel(registry, r.agent, r.target)),
    })),
  ];
  const mux = new Multiplexer({ routes: all });
  const address = await mux.listen({ host: '127.0.0.1', port: options.port ?? 0 });
  return {
    port: address.port,
    registry,
    mux,
    close: async () => {
      const closed = mux.close({ graceMs: 0 });
      registry.close();
      await closed;
    },
  };
}

/** The streams a raw agent session is opened: `open` (FramedStream, OpenPayload) for each. */
export interface RawOpens extends EventEmitter {
  on(event: 'open', listener: (stream: FramedStream, open: OpenPayload) => void): this;
}

/**
 * An agent reduced to what the proxy sees: a tunnel dialled to `address` with `pair` as its
 * certificate, held as a framed session whose streams the test answers itself (`opens` tells each
 * one; a stream nobody answers waits, a hostile agent's). Destroyed at teardown.
 */
export async function rawAgentSession(
  t: Teardownable,
  address: string,
  pair: KeyPair,
  ca: string | Buffer = devCertificates().ca.cert,
): Promise<{ socket: TLSSocket; session: FramedSession; opens: RawOpens }> {
  const { socket } = await dialTls(address, {
    alpn: [ALPN_REVERSE_TUNNEL_FRAMED],
    requireAlpn: true,
    ca,
    ...pair,
    serverName: 'localhost',
    proxy: null,
  });
  const opens = new EventEmitter() as RawOpens;
  const session = new FramedSession(socket, { side: 'dialer', onOpen: (stream, open) => opens.emit('open', stream, open) });
  t.teardown(() => {
    session.destroy();
    socket.destroy();
  });
  return { socket, session, opens };
}
