import { TLSSocket } from 'node:tls';
import { formatHostPort, parseTarget } from '../client/target.js';
import { ErrorCodes, GateError, toGateError } from '../errors.js';
import type { CustomHandler, TerminateHandler } from '../handlers/types.js';
import { terminate } from '../handlers/builders.js';
import { type CloseOptions, closeSessions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { dialThenRelay } from '../transport/dial-then-relay.js';
import { isValidAgentName } from '../vocabulary/agent-name.js';
import { refuseFramed } from '../tunnel/goaway-refusal.js';
import { statusForCode } from '../tunnel/refusal-status.js';
import type { TunnelRegistry } from '../tunnel/registry.js';
import { releaseTunnelStream, type TunnelStream } from '../tunnel/tunnel-stream.js';
import { FramedSession } from '../tunnel-framing/framed-session.js';
import { joinFramed } from '../tunnel-framing/framed-splice.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import { type OpenPayload, StreamKind } from '../tunnel-framing/frames.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, startHeartbeat } from '../tunnel/heartbeat.js';
import { PEER_MAX_STREAMS } from './peer-settings.js';
import { ALPN_PEER_FRAMED } from '../wire/names.js';
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
 * The peering server on `peer_listen_addr`: mutual TLS with ALPN `gate-proxy-peer-framed`, then one
 * session of gate-mux's tunnel framing per peer proxy, in which the peer opens one stream per client
 * connection it forwards: an OPEN naming the target, the agent and the client's real address. A
 * forwarded dial is served from this proxy's own tunnels only, never forwarded again, so two
 * proxies with stale records cannot bounce a dial between them. A refusal carries a GATE_ERR_*
 * code as the tunnel's do (lib/tunnel/refusal-status.ts).
 */
export class PeerServer implements Closable {
  private readonly log: Logger;
  private readonly sessions = new Set<FramedSession>();
  private readonly lifecycle = new Lifecycle();

  constructor(private readonly options: PeerServerOptions) {
    this.log = componentLogger(options.logger, 'peer-server');
  }

  /** The handler for the peer route: TLS ends here with a client certificate requested. */
  endpoint(tls: PeerEndpointTls): TerminateHandler {
    return terminate(
      {
        cert: tls.cert,
        key: tls.key,
        ca: tls.ca,
        alpnProtocols: [ALPN_PEER_FRAMED],
        requestCert: true,
        // Verified, not enforced by OpenSSL: `admitPeer` refuses with a code saying why.
        rejectUnauthorized: false,
        ...(tls.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: tls.handshakeTimeoutMs }),
      },
      this.handler(),
    );
  }

  /** Takes the TLS socket after `terminate` and starts the peer's session, or refuses it. */
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
        this.start(socket, remote);
      },
    };
  }

  /**
   * A peer's session: it dialled, so it opens the streams, one per forwarded connection. A peer's
   * FIN ends the session (the framing's own rule), and PINGs with a deadline end a peer that
   * vanished without one.
   */
  private start(socket: TLSSocket, remote: string): void {
    const session = new FramedSession(socket, {
      side: 'listener',
      onOpen: (stream, open) => this.serve(stream, open),
      // Not a tunnel's 1,000 streams: one peering session carries every forwarded connection
      // between two proxies (peer-settings.ts says why).
      maxConcurrentStreams: PEER_MAX_STREAMS,
    });
    this.sessions.add(session);
    session.once('close', (error?: GateError) => {
      if (error) this.log.debug({ remote, err: error }, 'peer session error');
      this.sessions.delete(session);
      socket.destroy();
    });
    this.heartbeat(session, socket, remote);
    this.log.info({ remote }, 'peer connected');
  }

  /**
   * A peer that vanished without a FIN (its host died) would leave its streams, and the agent
   * streams they hold, open: PINGs with a deadline end them, as for agents' tunnels.
   */
  private heartbeat(session: FramedSession, socket: TLSSocket, remote: string): void {
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
    for (const session of this.sessions) session.goAway();
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

  /** Tells a refused peer why (in a GOAWAY), then closes its connection with the error. */
  private refuse(socket: TLSSocket, error: GateError, remote: string): void {
    this.log.warn({ remote, code: error.code }, `peer refused: ${error.message}`);
    refuseFramed(socket, error);
  }

  /**
   * A forwarded dial's agent and target, checked: the target as the agent will dial it, or
   * GATE_ERR_TARGET_INVALID (GATE_ERR_DRAINING while this proxy drains).
   */
  private checkDial(agent: unknown, target: string): string {
    if (typeof agent !== 'string' || !isValidAgentName(agent))
      throw new GateError(ErrorCodes.TARGET_INVALID, 'no valid agent name in the OPEN');
    const parsed = parseTarget(target);
    if (parsed.scheme !== undefined) throw new GateError(ErrorCodes.TARGET_INVALID, 'a forwarded stream opens host:port');
    if (this.options.isDraining?.()) throw new GateError(ErrorCodes.DRAINING, 'this proxy is draining: no new forwarded dials');
    return formatHostPort(parsed.host, parsed.port);
  }

  /**
   * One forwarded dial: through this proxy's own tunnel to the agent, or a refusal with a code. The
   * answer is the agent's (status, code, reason) and on 200 the two streams are joined frame by
   * frame.
   */
  private serve(stream: FramedStream, open: OpenPayload): void {
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
    // frames span several TLS records, which may arrive in separate reads: a loop turn later they
    // are held, and go on with this proxy's own open to the agent instead of waiting for its answer.
    setImmediate(() => {
      if (stream.closed) return;
      this.forward(stream, { agent, target, client, firstBytes: stream.takeHeld() }, refuse, (upstream) => {
        stream.respond({ status: 200, code: '', reason: '' });
        joinFramed(stream, upstream);
      });
    });
  }

  /**
   * A forwarded dial: the agent's stream opened through this proxy's own tunnel (never forwarded
   * again: no loops), then joined to the peer's stream (`join`), or the failure told to the peer
   * (`refuse`). A peer stream that closes meanwhile cancels the open.
   */
  private forward(
    inbound: FramedStream,
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
}
