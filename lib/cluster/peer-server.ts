import {
  constants,
  createServer,
  type Http2Server,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import { TLSSocket } from 'node:tls';
import { formatHostPort, parseTarget } from '../client/target.js';
import { ErrorCodes, GateError, toGateError } from '../errors.js';
import type { CustomHandler, TerminateHandler } from '../handlers/types.js';
import { terminate } from '../handlers/builders.js';
import { type CloseOptions, closeSessions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { dialThenRelay } from '../transport/dial-then-relay.js';
import { splice } from '../transport/splice.js';
import { isValidAgentName } from '../tunnel/agent-identity.js';
import { clientOf } from '../tunnel/agent-stream.js';
import { refusalHeaders } from '../tunnel/connect-request.js';
import { refuseWithGoAway } from '../tunnel/goaway-refusal.js';
import { jsStreamOver } from '../tunnel/js-stream.js';
import { takeArrivedBytes } from '../tunnel/arrived-bytes.js';
import type { TunnelRegistry } from '../tunnel/registry.js';
import { releaseStream } from '../tunnel/release-stream.js';
import { closedCleanly, isFramedStream, releaseTunnelStream, type TunnelStream, tunnelDuplex } from '../tunnel/tunnel-stream.js';
import { releaseFramedStream } from '../tunnel-framing/framed-relay.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, startHeartbeat } from '../tunnel/heartbeat.js';
import { TUNNEL_WINDOW_BYTES } from '../tunnel/settings.js';
import { PEER_SESSION_SETTINGS } from './peer-settings.js';
import { ALPN_PEER, PEER_AGENT_HEADER } from '../wire/names.js';
import { admitPeer, peerTlsFacts } from './peer-identity.js';

export interface PeerServerOptions {
  /** This proxy's tunnels: the only ones a forwarded dial is served from. */
  registry: TunnelRegistry;
  logger?: Logger;
  /** True while the proxy drains: forwarded dials are refused with GATE_ERR_DRAINING. */
  isDraining?: () => boolean;
}

export interface PeerEndpointTls {
  /** This proxy's peering certificate (with the proxy role) and key. */
  cert: string | Buffer;
  key: string | Buffer;
  /** The cluster CA: what peers' certificates must chain to. */
  ca: string | Buffer;
  handshakeTimeoutMs?: number;
}

/**
 * The peering server on `peer_listen_addr`: mutual TLS with ALPN `gate-proxy-peer`,
 * then one HTTP/2 session per peer proxy in which the peer opens one CONNECT stream per client
 * connection it forwards (`:authority` the target, PEER_AGENT_HEADER the agent, CLIENT_ADDR_HEADER
 * the client's real address). A forwarded dial is served from this proxy's own tunnels only, never
 * forwarded again, so two proxies with stale records cannot bounce a dial between them. A refusal
 * carries a GATE_ERR_* code as the tunnel's do (lib/tunnel/connect-request.ts).
 */
export class PeerServer implements Closable {
  private readonly log: Logger;
  private readonly h2: Http2Server;
  private readonly sessions = new Set<ServerHttp2Session>();
  private readonly lifecycle = new Lifecycle();

  constructor(private readonly options: PeerServerOptions) {
    this.log = componentLogger(options.logger, 'peer-server');
    this.h2 = createServer({ settings: PEER_SESSION_SETTINGS });
    this.h2.on('stream', (stream, headers) => this.serve(stream, headers));
  }

  /** The handler for the peer route: TLS ends here with a client certificate requested. */
  endpoint(tls: PeerEndpointTls): TerminateHandler {
    return terminate(
      {
        cert: tls.cert,
        key: tls.key,
        ca: tls.ca,
        alpnProtocols: [ALPN_PEER],
        requestCert: true,
        // Verified, not enforced by OpenSSL: `admitPeer` refuses with a code saying why.
        rejectUnauthorized: false,
        ...(tls.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: tls.handshakeTimeoutMs }),
      },
      this.handler(),
    );
  }

  /** Takes the TLS socket after `terminate` and starts the peer's HTTP/2 session, or refuses it. */
  handler(): CustomHandler {
    return {
      kind: 'custom',
      handle: (socket) => {
        if (!(socket instanceof TLSSocket))
          throw new GateError(ErrorCodes.PEER_REFUSED, 'the peer handler needs the TLS socket (put it right after terminate)');
        const remote = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
        try {
          if (this.lifecycle.ending) throw new GateError(ErrorCodes.SHUTDOWN, 'the peering server is closed');
          admitPeer(peerTlsFacts(socket));
        } catch (err) {
          this.refuse(socket, toGateError(err, ErrorCodes.PEER_REFUSED), remote);
          return;
        }
        const session = this.startSession(socket);
        if (!session) return;
        this.sessions.add(session);
        session.on('error', (err) => this.log.debug({ remote, err }, 'peer session error'));
        session.once('close', () => {
          this.sessions.delete(session);
          socket.destroy();
        });
        // Half-open as the agents' tunnels are (lib/tunnel/registry.ts): a peer's FIN ends it.
        socket.once('end', () => {
          session.destroy();
          socket.destroy();
        });
        // A peer that vanished without a FIN (its host died) would leave its streams, and the
        // agent streams they hold, open: PINGs with a deadline end them, as for agents' tunnels.
        startHeartbeat(session, {
          intervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
          timeoutMs: DEFAULT_HEARTBEAT_TIMEOUT_MS,
          onTimeout: (why) => {
            this.log.warn({ remote }, `peering session lost: ${why}`);
            session.destroy();
            socket.destroy();
          },
        });
        this.log.info({ remote }, 'peer connected');
      },
    };
  }

  /** GOAWAY to every peer: no new forwarded dials, open ones finish. */
  goAway(): void {
    for (const session of this.sessions) if (!session.closed && !session.destroyed) session.close();
  }

  /** open, closing (peers told GOAWAY, their streams finishing), closed (every session gone). */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /**
   * Refuses new peers; with `graceMs`, tells every peer GOAWAY and gives open streams that long to
   * finish; then destroys every peering session and its streams. Resolves once every session has
   * closed; a second call returns the same promise.
   */
  close(options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(() => closeSessions(this.sessions, options, { goAway: () => this.goAway(), endAll: () => this.endAll() }));
  }

  /** Destroys every peering session and its streams now; new peers are refused. */
  destroy(err?: GateError): void {
    if (this.lifecycle.destroy()) this.endAll(err);
  }

  private endAll(error?: GateError): void {
    for (const session of this.sessions) session.destroy(error);
  }

  /**
   * An HTTP/2 server session over the socket. An admitted peer's session takes the TLS socket's
   * native stream over, as agents' tunnels do (registry.ts): the peering hop's bytes go from
   * OpenSSL to nghttp2 in C++, not through a JavaScript read and write per chunk. A refusal goes
   * through `jsStreamOver` (lib/tunnel/js-stream.ts), so that the socket is destroyed with the
   * reason (`destroyError`) once the GOAWAY is out.
   */
  private startSession(socket: TLSSocket, destroyError?: () => Error): ServerHttp2Session | undefined {
    let session: ServerHttp2Session | undefined;
    const onSession = (s: ServerHttp2Session): void => {
      session = s;
    };
    // 'session' is emitted synchronously from the 'connection' handler.
    this.h2.once('session', onSession);
    this.h2.emit('connection', destroyError ? jsStreamOver(socket, { destroyError }) : socket);
    this.h2.removeListener('session', onSession);
    if (!session) {
      socket.destroy(new GateError(ErrorCodes.PEER_REFUSED, 'HTTP/2 session could not start on the peering connection'));
      return undefined;
    }
    const started = session;
    started.once('remoteSettings', () => {
      if (!started.destroyed) started.setLocalWindowSize(TUNNEL_WINDOW_BYTES);
    });
    return started;
  }

  /** Tells a refused peer why (GOAWAY debug data), then closes its connection with the error. */
  private refuse(socket: TLSSocket, error: GateError, remote: string): void {
    this.log.warn({ remote, code: error.code }, `peer refused: ${error.message}`);
    const session = this.startSession(socket, () => error);
    if (!session) return;
    session.on('error', () => {}); // the other end may already be gone; the refusal is logged above
    // No stream is served on a refused session.
    session.on('stream', (stream) => stream.close(constants.NGHTTP2_REFUSED_STREAM));
    refuseWithGoAway(session, socket, error);
  }

  /** One forwarded dial: through this proxy's own tunnel to the agent, or a refusal with a code. */
  private serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on('error', (err) => this.log.debug({ err }, 'peer stream error'));
    if (!this.sessions.has(stream.session as ServerHttp2Session)) {
      stream.close(constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    const refuse = (error: GateError): void => {
      if (stream.destroyed || stream.headersSent) return;
      stream.respond(refusalHeaders(error.code, error.message), { endStream: true });
    };
    const agent = headers[PEER_AGENT_HEADER];
    let target: string;
    try {
      if (headers[':method'] !== 'CONNECT')
        throw new GateError(ErrorCodes.TARGET_INVALID, `only CONNECT is served, not ${String(headers[':method'])}`);
      if (typeof agent !== 'string' || !isValidAgentName(agent))
        throw new GateError(ErrorCodes.TARGET_INVALID, `no valid agent name in ${PEER_AGENT_HEADER}`);
      const parsed = parseTarget(String(headers[':authority'] ?? ''));
      if (parsed.scheme !== undefined) throw new GateError(ErrorCodes.TARGET_INVALID, 'CONNECT takes host:port');
      target = formatHostPort(parsed.host, parsed.port);
      if (this.options.isDraining?.()) throw new GateError(ErrorCodes.DRAINING, 'this proxy is draining: no new forwarded dials');
    } catch (err) {
      refuse(toGateError(err, ErrorCodes.TARGET_INVALID));
      return;
    }
    const client = clientOf(headers);
    // The client's first bytes (the front proxy writes them right after the CONNECT) go on with
    // this proxy's own CONNECT to the agent, so this hop does not wait for the agent's answer either.
    takeArrivedBytes(stream, (firstBytes) => this.dialAgent(stream, agent, target, client, firstBytes, refuse));
  }

  /** The agent's stream for a forwarded dial, relayed to the peer's once the agent has answered. */
  private dialAgent(
    stream: ServerHttp2Stream,
    agent: string,
    target: string,
    client: string | undefined,
    firstBytes: Buffer | undefined,
    refuse: (error: GateError) => void,
  ): void {
    if (stream.destroyed || stream.closed) return; // the peer let go while the bytes were taken
    void dialThenRelay<TunnelStream>(stream, {
      closedWhy: 'peer stream closed',
      gone: () => stream.destroyed || stream.closed,
      // Local tunnels only: a dial that came from a peer is never forwarded again (no loops).
      dial: (cancel) => this.options.registry.open(agent, target, { cancel, client, firstBytes }),
      release: releaseTunnelStream,
      fail: (err) => {
        const error = toGateError(err, ErrorCodes.AGENT_STREAM_FAILED);
        this.log.debug({ agent, target, code: error.code }, `forwarded dial failed: ${error.message}`);
        refuse(error);
      },
      relay: (upstream) => {
        stream.respond({ ':status': 200 });
        // An agent stream that ended with a reset is passed on as one (RFC 9113 §8.5
        // CONNECT_ERROR): left to splice, the peer would see RST_STREAM NO_ERROR, a clean end.
        upstream.once('close', () => {
          if (!closedCleanly(upstream) && !stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_CONNECT_ERROR);
        });
        // A peer stream whose END_STREAM came with its first bytes ended when they were taken:
        // splice passes that FIN on at once. A framed agent stream goes through its Duplex while
        // peering speaks HTTP/2.
        const framed = isFramedStream(upstream);
        splice(stream, tunnelDuplex(upstream), () => {}, undefined, {
          releaseB: framed ? () => releaseFramedStream(upstream) : (s) => releaseStream(s),
        });
      },
    });
  }
}
