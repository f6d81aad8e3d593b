import type { TLSSocket } from 'node:tls';
import { dialTls } from '../client/dial-tls.js';
import { ErrorCodes, GateError, type ErrorCode } from '../errors.js';
import { type CloseOptions, closeEvent, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { readRefusalDebugData } from '../tunnel/admission.js';
import { awaitFramedAnswer, type ConnectAnswerOptions } from '../tunnel/framed-answer.js';
import type { TunnelStream } from '../tunnel/tunnel-stream.js';
import { FramedSession } from '../tunnel-framing/framed-session.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import { type GoAwayPayload, StreamKind, WireError, wireErrorName } from '../tunnel-framing/frames.js';
import type { OpenStreamOptions } from '../tunnel/registry.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, startHeartbeat } from '../tunnel/heartbeat.js';
import { ALPN_PEER_FRAMED } from '../wire/names.js';
import { admitPeer, peerTlsFacts } from './peer-identity.js';

/** A proxy to forward to: its id in the route store and the address it serves peering on. */
export interface PeerAddress {
  id: string;
  peerAddr: string;
}

/** This proxy's side of peering TLS. */
export interface PeerIdentity {
  /** This proxy's peering certificate and key (with the proxy role). */
  cert: string | Buffer;
  key: string | Buffer;
  /** The cluster CA: the peer's certificate must chain to it and carry the proxy role. */
  ca: string | Buffer;
}

export interface PeerPoolOptions {
  /** Read at each new session, so a reload's certificates apply to the next one. */
  identity: () => PeerIdentity;
  logger?: Logger;
  /** Deadline for the TCP connect and the TLS handshake to a peer (default 5 s). */
  dialTimeoutMs?: number;
  /** Milliseconds the holder has to answer a forwarded dial (default 15 s). */
  openTimeoutMs?: number;
}

interface PeerConnection {
  addr: string;
  session: Promise<FramedSession>;
  /** Why the peer ended the session, once it has (its GOAWAY's code, or the socket's end). */
  ended?: string;
}

/**
 * Codes a holder's refusal keeps as they are: they say something about the agent or the target,
 * which the next holder would answer the same way, or that the holder is leaving. Anything else the
 * peer says becomes GATE_ERR_PEER_DIAL_FAILED.
 */
const KEPT_CODES: ReadonlySet<ErrorCode> = new Set([
  ErrorCodes.AGENT_OFFLINE,
  ErrorCodes.AGENT_BUSY,
  ErrorCodes.AGENT_TARGET_DENIED,
  ErrorCodes.AGENT_STREAM_FAILED,
  ErrorCodes.DRAINING,
  ErrorCodes.PEER_REFUSED,
]);

/**
 * The client side of peering: one session per peer proxy (gate-mux's tunnel framing), opened on
 * first use, reused by every forwarded connection, opened again after it ends, and closed when the peer leaves the
 * cluster (`retain`). Mutual TLS both ways: this proxy shows its peering certificate, and the peer's
 * must be from the cluster CA with the proxy role (an agent's or client's certificate is refused
 * even though the same CA signed it). The peer is dialled directly, never through HTTPS_PROXY:
 * peers are in the cluster's own network (as the platform's proxies dial each other).
 */
export class PeerPool implements Closable {
  private readonly log: Logger;
  private readonly peers = new Map<string, PeerConnection>();
  private readonly lifecycle = new Lifecycle();

  constructor(private readonly options: PeerPoolOptions) {
    this.log = componentLogger(options.logger, 'peer-pool');
  }

  /** Ids of the peers with a session (being) opened. */
  connected(): string[] {
    return [...this.peers.keys()];
  }

  /**
   * Opens a stream to `target` through `agent`'s tunnel on `peer`, resolving once the agent has
   * dialled it. Errors: GATE_ERR_PEER_DIAL_FAILED (the peer cannot be reached, is not a proxy of
   * this cluster, or lost the session), else the code the peer answered with (GATE_ERR_AGENT_OFFLINE
   * when the agent is not connected to it, GATE_ERR_AGENT_TARGET_DENIED, GATE_ERR_DRAINING, ...).
   */
  async open(peer: PeerAddress, agent: string, target: string, options: OpenStreamOptions = {}): Promise<TunnelStream> {
    const where = `agent ${agent} -> ${target} via proxy ${peer.id} (${peer.peerAddr})`;
    if (this.lifecycle.ending) throw new GateError(ErrorCodes.SHUTDOWN, `${where}: the peer pool is closed`);
    const connection = this.connection(peer);
    let session: FramedSession;
    try {
      session = await connection.session;
    } catch (err) {
      throw new GateError(ErrorCodes.PEER_DIAL_FAILED, `${where}: ${(err as Error).message}`, { cause: err });
    }
    const timeoutMs = options.timeoutMs ?? this.options.openTimeoutMs ?? 15_000;
    const why = (): string =>
      session.closed ? 'the peering session ended' : `stream reset (${wireErrorName(stream.closeCode ?? WireError.NO_ERROR)})`;
    const answer: ConnectAnswerOptions = {
      timeoutMs,
      cancel: options.cancel ?? options.signal,
      where,
      refused: (refusal) => {
        const code = refusal.code !== undefined && KEPT_CODES.has(refusal.code) ? refusal.code : ErrorCodes.PEER_DIAL_FAILED;
        return new GateError(code, `${where}: ${refusal.message}${refusal.code && refusal.code !== code ? ` (${refusal.code})` : ''}`);
      },
      lost: () => new GateError(ErrorCodes.PEER_DIAL_FAILED, `${where}: ${connection.ended ?? why()}`),
      timedOut: () => new GateError(ErrorCodes.PEER_DIAL_FAILED, `${where}: no answer within ${timeoutMs} ms`),
    };
    let stream: FramedStream;
    try {
      stream = session.open({ kind: StreamKind.CONNECT, target, client: options.client ?? '', agent });
    } catch (err) {
      throw new GateError(ErrorCodes.PEER_DIAL_FAILED, `${where}: ${(err as Error).message}`, { cause: err });
    }
    if (options.firstBytes) stream.write(options.firstBytes);
    return awaitFramedAnswer(stream, answer);
  }

  /** Closes the sessions to peers not in `liveIds` (they left the store, or restarted under a new id). */
  retain(liveIds: Iterable<string>): void {
    const live = new Set(liveIds);
    for (const [id, connection] of this.peers) {
      if (live.has(id)) continue;
      this.peers.delete(id);
      this.log.info({ peer: id, addr: connection.addr }, 'peer left the cluster: session closed');
      connection.session.then(
        (s) => s.goAway(),
        () => {},
      );
    }
  }

  /** open, or closed: the pool holds no session of its own to finish (the peer serves the streams). */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /**
   * Closes every session at once (their streams too): the forwarded connections on them are the
   * clients' and end with them, so there is nothing to drain. Resolves once each session (a dial in
   * progress included) has closed; a second call returns the same promise.
   */
  close(_options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(() => this.endAll());
  }

  /** Destroys every session now (their streams reset with `err`); new dials are refused. */
  destroy(err?: GateError): void {
    if (this.lifecycle.destroy()) void this.endAll(err);
  }

  private async endAll(error?: GateError): Promise<void> {
    const connections = [...this.peers.values()];
    this.peers.clear();
    await Promise.all(
      connections.map((connection) =>
        connection.session.then(
          (s) => {
            const gone = s.closed ? Promise.resolve() : closeEvent(s);
            s.destroy(error);
            return gone;
          },
          () => {},
        ),
      ),
    );
  }

  /** The session to `peer`, reused while it lasts; a new one when absent, ended or the address changed. */
  private connection(peer: PeerAddress): PeerConnection {
    const held = this.peers.get(peer.id);
    if (held && held.addr === peer.peerAddr && held.ended === undefined) return held;
    if (held)
      held.session.then(
        (s) => s.goAway(),
        () => {},
      );
    const connection = { addr: peer.peerAddr } as PeerConnection;
    connection.session = this.dial(peer, connection);
    // A failed dial is not kept: the next forwarded connection tries again.
    connection.session.catch(() => {
      if (this.peers.get(peer.id) === connection) this.peers.delete(peer.id);
    });
    this.peers.set(peer.id, connection);
    return connection;
  }

  private async dial(peer: PeerAddress, connection: PeerConnection): Promise<FramedSession> {
    const identity = this.options.identity();
    const { socket } = await dialTls(peer.peerAddr, {
      proxy: null,
      alpn: [ALPN_PEER_FRAMED],
      requireAlpn: true,
      ca: identity.ca,
      cert: identity.cert,
      key: identity.key,
      // Verified here rather than by host name: peers are dialled by address, and what matters is
      // that the certificate is a proxy's of this cluster (admitPeer), which OpenSSL cannot check.
      // The chain is still verified (`authorized`); only the refusal is ours, with its code.
      rejectUnauthorized: false,
      checkServerIdentity: () => undefined,
      timeoutMs: this.options.dialTimeoutMs ?? 5_000,
    });
    try {
      admitPeer(peerTlsFacts(socket));
    } catch (err) {
      socket.destroy();
      throw new GateError(ErrorCodes.PEER_DIAL_FAILED, `${peer.peerAddr} is not a proxy of this cluster: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const forget = (why: string): void => {
      connection.ended ??= why;
      if (this.peers.get(peer.id) === connection) this.peers.delete(peer.id);
    };
    const session = this.framedSession(socket, forget);
    // A peer whose host died without a FIN is noticed as a tunnel's agent is (PINGs with a
    // deadline), so dials stop waiting on its session before its presence has even expired.
    startHeartbeat(session, {
      intervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
      timeoutMs: DEFAULT_HEARTBEAT_TIMEOUT_MS,
      onTimeout: (why) => {
        forget(`heartbeat: ${why}`);
        this.log.warn({ peer: peer.id, addr: peer.peerAddr, code: ErrorCodes.PEER_DIAL_FAILED }, `peering session lost: ${why}`);
        session.destroy();
        socket.destroy();
      },
    });
    // Streams wait for the peer's HELLO: before it a stream's first bytes have no credit and would
    // follow their OPEN a round trip later, while the holder passes on only the bytes that came
    // with the OPEN (peer-server.ts) and then waits for the agent's answer.
    await peerHello(session, this.options.dialTimeoutMs ?? 5_000, peer.peerAddr);
    this.log.debug({ peer: peer.id, addr: peer.peerAddr }, 'peering session opened');
    return session;
  }

  /** The framed session to a peer: this proxy dialled, so it opens the (odd-numbered) streams. */
  private framedSession(socket: TLSSocket, forget: (why: string) => void): FramedSession {
    const session = new FramedSession(socket, { side: 'dialer' });
    // A GOAWAY (the peer drains or refused us, its reason saying why) ends this session for new
    // streams: the next dial opens a new one while open streams finish on this one.
    session.on('goaway', (goAway: GoAwayPayload) => {
      const refusal = readRefusalDebugData(Buffer.from(goAway.reason, 'latin1'));
      forget(refusal ? `${refusal.code} ${refusal.message}` : `the peer sent GOAWAY (${wireErrorName(goAway.code)})`);
    });
    session.once('close', (error?: GateError) => {
      forget(error?.message ?? 'the peering session closed');
      socket.destroy();
    });
    return session;
  }
}

/** Resolves once the peer's HELLO has come; GATE_ERR_PEER_DIAL_FAILED if the session ends or none comes in time. */
function peerHello(session: FramedSession, timeoutMs: number, addr: string): Promise<void> {
  if (session.peerLimits) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (err?: GateError): void => {
      clearTimeout(timer);
      session.removeListener('hello', onHello);
      session.removeListener('close', onClose);
      if (err) reject(err);
      else resolve();
    };
    const onHello = (): void => done();
    const onClose = (): void => done(new GateError(ErrorCodes.PEER_DIAL_FAILED, `${addr}: the peering session ended before its HELLO`));
    const timer = setTimeout(() => {
      done(new GateError(ErrorCodes.PEER_DIAL_FAILED, `${addr}: no HELLO within ${timeoutMs} ms`));
      session.destroy();
    }, timeoutMs);
    timer.unref();
    session.once('hello', onHello);
    session.once('close', onClose);
  });
}
