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
import { isValidAgentName } from '../vocabulary/agent-name.js';
import { clientOf } from '../tunnel/agent-stream.js';
import { refusalHeaders, statusForCode } from '../tunnel/connect-request.js';
import { goAwayGracefully } from '../tunnel/go-away.js';
import { refuseFramed, refuseWithGoAway } from '../tunnel/goaway-refusal.js';
import { jsStreamOver } from '../tunnel/js-stream.js';
import { takeArrivedBytes } from '../tunnel/arrived-bytes.js';
import type { TunnelRegistry } from '../tunnel/registry.js';
import { releaseStream } from '../tunnel/release-stream.js';
import { closedCleanly, isFramedStream, releaseTunnelStream, type TunnelStream, tunnelDuplex } from '../tunnel/tunnel-stream.js';
import { FramedDuplex } from '../tunnel-framing/framed-duplex.js';
import { releaseFramedStream } from '../tunnel-framing/framed-relay.js';
import { FramedSession } from '../tunnel-framing/framed-session.js';
import { joinFramed } from '../tunnel-framing/framed-splice.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import { type OpenPayload, StreamKind, WireError } from '../tunnel-framing/frames.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, startHeartbeat } from '../tunnel/heartbeat.js';
import { TUNNEL_WINDOW_BYTES } from '../tunnel/settings.js';
import { PEER_SESSION_SETTINGS } from './peer-settings.js';
import { ALPN_PEER, ALPN_PEER_FRAMED, PEER_AGENT_HEADER, PEER_ALPNS } from '../wire/names.js';
import { admitPeer, peerTlsFacts } from './peer-identity.js';

export interface PeerServerOptions {
  /** This proxy's tunnels: the only ones a forwarded dial is served from. */
  registry: TunnelRegistry;
  logger?: Logger;
  /** True while the proxy drains: forwarded dials are refused with GATE_ERR_DRAINING. */
  isDraining?: () => boolean;
  /**
   * `auto` (default): the peering endpoint selects the tunnel framing when the peer offers it,
   * else HTTP/2; `http2`: HTTP/2 alone, as proxies before the framing.
   */
  protocol?: 'auto' | 'http2';
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
 * The peering server on `peer_listen_addr`: mutual TLS with ALPN `gate-proxy-peer-framed` (the
 * tunnel framing, chosen first) or `gate-proxy-peer` (HTTP/2, for a peer older than the framing),
 * then one session per peer proxy in which the peer opens one stream per client connection it
 * forwards: an OPEN naming the target, the agent and the client's real address, or an HTTP/2
 * CONNECT (`:authority` the target, PEER_AGENT_HEADER the agent, CLIENT_ADDR_HEADER the client). A forwarded dial is served from this proxy's own tunnels only, never
 * forwarded again, so two proxies with stale records cannot bounce a dial between them. A refusal
 * carries a GATE_ERR_* code as the tunnel's do (lib/tunnel/connect-request.ts).
 */
export class PeerServer implements Closable {
  private readonly log: Logger;
  private readonly h2: Http2Server;
  private readonly sessions = new Set<ServerHttp2Session | FramedSession>();
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
        alpnProtocols: this.options.protocol === 'http2' ? [ALPN_PEER] : [...PEER_ALPNS],
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
        if (socket.alpnProtocol === ALPN_PEER_FRAMED) return this.startFramed(socket, remote);
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
        this.heartbeat(session, socket, remote);
        this.log.info({ remote, protocol: 'http2' }, 'peer connected');
      },
    };
  }

  /**
   * A peer's framed session: it dialled, so it opens the streams, one per forwarded connection.
   * A peer's FIN ends the session (the framing's own rule), and PINGs with a deadline end a peer
   * that vanished without one, as for HTTP/2 peers.
   */
  private startFramed(socket: TLSSocket, remote: string): void {
    const session = new FramedSession(socket, {
      side: 'listener',
      onOpen: (stream, open) => this.serveFramed(stream, open),
      // Not a tunnel's 1,000 streams: one peering session carries every forwarded connection
      // between two proxies (peer-settings.ts says why).
      maxConcurrentStreams: PEER_SESSION_SETTINGS.maxConcurrentStreams,
    });
    this.sessions.add(session);
    session.once('close', (error?: GateError) => {
      if (error) this.log.debug({ remote, err: error }, 'peer session error');
      this.sessions.delete(session);
      socket.destroy();
    });
    this.heartbeat(session, socket, remote);
    this.log.info({ remote, protocol: 'framed' }, 'peer connected');
  }

  /**
   * A peer that vanished without a FIN (its host died) would leave its streams, and the agent
   * streams they hold, open: PINGs with a deadline end them, as for agents' tunnels.
   */
  private heartbeat(session: ServerHttp2Session | FramedSession, socket: TLSSocket, remote: string): void {
    startHeartbeat(session, {
      intervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
      timeoutMs: DEFAULT_HEARTBEAT_TIMEOUT_MS,
      onTimeout: (why) => {
        this.log.warn({ remote }, `peering session lost: ${why}`);
        session.destroy();
        socket.destroy();
      },
    });
  }

  /** GOAWAY to every peer: no new forwarded dials, open ones finish. */
  goAway(): void {
    for (const session of this.sessions) goAwayGracefully(session);
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

  /** Tells a refused peer why (in a GOAWAY), then closes its connection with the error. */
  private refuse(socket: TLSSocket, error: GateError, remote: string): void {
    this.log.warn({ remote, code: error.code }, `peer refused: ${error.message}`);
    if (socket.alpnProtocol === ALPN_PEER_FRAMED) return refuseFramed(socket, error);
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
      target = this.checkDial(agent, String(headers[':authority'] ?? ''));
    } catch (err) {
      refuse(toGateError(err, ErrorCodes.TARGET_INVALID));
      return;
    }
    const client = clientOf(headers);
    // The client's first bytes (the front proxy writes them right after the CONNECT) go on with
    // this proxy's own CONNECT to the agent, so this hop does not wait for the agent's answer either.
    takeArrivedBytes(stream, (firstBytes) => this.dialAgent(stream, agent as string, target, client, firstBytes, refuse));
  }

  /**
   * A forwarded dial's agent and target, checked: the target as the agent will dial it, or
   * GATE_ERR_TARGET_INVALID (GATE_ERR_DRAINING while this proxy drains).
   */
  private checkDial(agent: unknown, authority: string): string {
    if (typeof agent !== 'string' || !isValidAgentName(agent))
      throw new GateError(ErrorCodes.TARGET_INVALID, `no valid agent name in ${PEER_AGENT_HEADER}`);
    const parsed = parseTarget(authority);
    if (parsed.scheme !== undefined) throw new GateError(ErrorCodes.TARGET_INVALID, 'CONNECT takes host:port');
    if (this.options.isDraining?.()) throw new GateError(ErrorCodes.DRAINING, 'this proxy is draining: no new forwarded dials');
    return formatHostPort(parsed.host, parsed.port);
  }

  /**
   * One forwarded dial on a framed peering session: the same checks and the same dial as on
   * HTTP/2; the answer is the agent's (status, code, reason) and on 200 the two streams are joined
   * frame by frame (an agent on HTTP/2: through the framed stream's Duplex).
   */
  private serveFramed(stream: FramedStream, open: OpenPayload): void {
    const refuse = (error: GateError): void =>
      stream.respond({ status: statusForCode(error.code), code: error.code, reason: error.message });
    let target: string;
    try {
      if (open.kind !== StreamKind.CONNECT) throw new GateError(ErrorCodes.TARGET_INVALID, `a stream of kind ${open.kind} is not served`);
      target = this.checkDial(open.agent, open.target);
    } catch (err) {
      return refuse(toGateError(err, ErrorCodes.TARGET_INVALID));
    }
    const agent = open.agent as string;
    const client = open.client || undefined;
    // The front proxy writes its OPEN and the client's first bytes together, but a busy turn's
    // frames span several TLS records, which may arrive in separate reads: a loop turn later
    // (as takeArrivedBytes waits on HTTP/2) they are held, and go on with this proxy's own open
    // to the agent instead of waiting for its answer.
    setImmediate(() => {
      if (stream.closed) return;
      this.forward(stream, { agent, target, client, firstBytes: stream.takeHeld() }, refuse, (upstream) => {
        stream.respond({ status: 200, code: '', reason: '' });
        if (isFramedStream(upstream)) return joinFramed(stream, upstream);
        // An HTTP/2 agent's reset is passed on as CONNECT_ERROR, as on an HTTP/2 peering stream.
        upstream.once('close', () => {
          if (!closedCleanly(upstream) && !stream.closed) stream.reset(WireError.CONNECT_ERROR, 'the agent reset the stream');
        });
        splice(new FramedDuplex(stream), upstream, () => {}, undefined, { releaseB: (s) => releaseStream(s) });
      });
    });
  }

  /**
   * A forwarded dial, whichever protocol the peer speaks: the agent's stream opened through this
   * proxy's own tunnel (never forwarded again: no loops), then joined to the peer's stream
   * (`join`), or the failure told to the peer (`refuse`). A peer stream that closes meanwhile
   * cancels the open.
   */
  private forward(
    inbound: ServerHttp2Stream | FramedStream,
    dial: { agent: string; target: string; client: string | undefined; firstBytes: Buffer | undefined },
    refuse: (error: GateError) => void,
    join: (upstream: TunnelStream) => void,
  ): void {
    const { agent, target, client, firstBytes } = dial;
    void dialThenRelay<TunnelStream>(inbound, {
      closedWhy: 'peer stream closed',
      gone: () => inbound.destroyed || inbound.closed,
      dial: (cancel) => this.options.registry.open(agent, target, { cancel, client, firstBytes }),
      release: releaseTunnelStream,
      fail: (err) => {
        const error = toGateError(err, ErrorCodes.AGENT_STREAM_FAILED);
        this.log.debug({ agent, target, code: error.code }, `forwarded dial failed: ${error.message}`);
        refuse(error);
      },
      relay: join,
    });
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
    this.forward(stream, { agent, target, client, firstBytes }, refuse, (upstream) => {
      stream.respond({ ':status': 200 });
      // An agent stream that ended with a reset is passed on as one (RFC 9113 §8.5
      // CONNECT_ERROR): left to splice, the peer would see RST_STREAM NO_ERROR, a clean end.
      upstream.once('close', () => {
        if (!closedCleanly(upstream) && !stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_CONNECT_ERROR);
      });
      // A peer stream whose END_STREAM came with its first bytes ended when they were taken:
      // splice passes that FIN on at once. A framed agent stream goes through its Duplex.
      const framed = isFramedStream(upstream);
      splice(stream, tunnelDuplex(upstream), () => {}, undefined, {
        releaseB: framed ? () => releaseFramedStream(upstream) : (s) => releaseStream(s),
      });
    });
  }
}
