import { EventEmitter } from 'node:events';
import type { TLSSocket } from 'node:tls';
import { dialTls, type ConnectionUpgradeDial } from '../client/dial-tls.js';
import type { ProxyConfig } from '../client/proxy-config.js';
import { ErrorCodes, GateError } from '../errors.js';
import { type CloseOptions, type ConnectionState, within, type Closable } from '../lifecycle.js';
import type { Logger } from '../log.js';
import { ALPN_REVERSE_TUNNEL_FRAMED } from '../wire/names.js';
import type { ClusterView } from './cluster-view.js';
import { descriptionLine, type AgentDescription } from './agent-description.js';
import type { AgentStreamOptions } from './agent-stream.js';
import { startFramedLink } from './framed-proxy-link.js';
import { startHeartbeat } from './heartbeat.js';
import { TunnelAdmission } from './tunnel-admission.js';
import type { DescribeAnswer, LinkEvents, ProxyLink } from './proxy-link.js';

/** What a tunnel's open streams get to finish after close() when no `graceMs` is given. */
const DEFAULT_TUNNEL_GRACE_MS = 5_000;

/** What one tunnel needs from its agent. */
export interface AgentTunnelSettings {
  proxy: string;
  ca: string | Buffer | Array<string | Buffer>;
  cert: string | Buffer;
  key: string | Buffer;
  serverName?: string | undefined;
  env?: NodeJS.ProcessEnv | undefined;
  dialProxy?: ProxyConfig | null | undefined;
  connectionUpgrade?: ConnectionUpgradeDial | undefined;
  dialTimeoutMs?: number | undefined;
  targetDialTimeoutMs: number;
  /** Streams the proxy may hold open at once (settings.ts). */
  maxStreams?: number | undefined;
  heartbeatIntervalMs: number;
  heartbeatTimeoutMs: number;
  logger?: Logger | undefined;
  log: Logger;
  allow: (target: string) => boolean;
  signal: AbortSignal;
  /** Told about each target connection and each stream served, for the agent's counts and close(). */
  track: AgentStreamOptions['track'];
  served: () => void;
  /** What the agent tells a proxy that asks (its describe stream): read when asked. */
  description: () => AgentDescription;
}

/**
 * One tunnel of an agent: a TLS connection it dialled to the proxy (through the load balancer and
 * HTTPS_PROXY), held as a session of gate-mux's tunnel framing whose streams the proxy opens.
 * Events: `up` once the proxy has registered it (the answer to a first PING arrived, and the
 * proxy's verdict when it asked for a description); `view`
 * (ClusterView) whenever the proxy says which proxy it is and which proxies exist; `refused`
 * (GateError) when the proxy refuses the tunnel, with the proxy's code.
 */
export class AgentTunnel extends EventEmitter implements Closable {
  /** The proxy this tunnel landed on, once it said (its cluster view). */
  proxyId: string | undefined;
  /** True from `up` until the session stops taking new streams. */
  up = false;
  /** True once `up` was emitted, whatever happened since. */
  private cameUp = false;
  /** The environment proxy it went through, redacted, or `direct`. */
  via = 'direct';
  /** Epoch milliseconds the dial began. */
  readonly startedAt = Date.now();
  /** Why the session ended or stopped taking streams, once known. */
  reason: string | undefined;
  refusal: GateError | undefined;
  private session: ProxyLink | undefined;
  private socket: TLSSocket | undefined;
  /** The proxy's describe stream, while open: changes to the description are written on it. */
  private describe: DescribeAnswer | undefined;
  /** What the proxy has said towards admitting this tunnel (tunnel-admission.ts), once dialled. */
  private admission: TunnelAdmission | undefined;
  private ended = false;
  /** Set by destroy() (close() ends in it): nothing is held any more. */
  private released = false;
  private closing: Promise<void> | undefined;
  /** Resolves once the session (or the socket, when no session began) has closed for good. */
  readonly finished: Promise<void>;
  private finish = (): void => {};

  constructor(private readonly settings: AgentTunnelSettings) {
    super();
    this.finished = new Promise((resolve) => (this.finish = resolve));
    void this.finished.then(() => (this.released = true));
  }

  /**
   * Dials and serves until the session stops taking new streams: it closed, or the proxy sent
   * GOAWAY (then the open streams finish on it while the agent dials another; `finished` says when
   * they have). Resolves after a tunnel that came up; throws the refusal, or the failure, of one
   * that never did.
   */
  async run(): Promise<void> {
    try {
      await this.serve();
    } catch (err) {
      this.finish();
      throw err;
    }
  }

  private async serve(): Promise<void> {
    const o = this.settings;
    const { socket, via, upgraded } = await dialTls(o.proxy, {
      alpn: [ALPN_REVERSE_TUNNEL_FRAMED],
      requireAlpn: true,
      ca: o.ca,
      cert: o.cert,
      key: o.key,
      ...(o.serverName === undefined ? {} : { serverName: o.serverName }),
      ...(o.env === undefined ? {} : { env: o.env }),
      ...(o.dialProxy === undefined ? {} : { proxy: o.dialProxy }),
      ...(o.connectionUpgrade === undefined ? {} : { connectionUpgrade: o.connectionUpgrade }),
      ...(o.dialTimeoutMs === undefined ? {} : { timeoutMs: o.dialTimeoutMs }),
      ...(o.logger === undefined ? {} : { logger: o.logger }),
      signal: o.signal,
    });
    if (o.signal.aborted || this.ended) {
      socket.destroy();
      throw new GateError(ErrorCodes.SHUTDOWN, 'agent stopping');
    }
    this.via = `${via?.display ?? 'direct'}${upgraded ? ' (connection upgrade)' : ''}`;
    this.socket = socket;
    socket.on('error', (err) => o.log.debug({ err }, 'tunnel socket error'));
    const streams: AgentStreamOptions = { allow: o.allow, dialTimeoutMs: o.targetDialTimeoutMs, log: o.log, track: o.track };
    let onGoaway = (): void => {};
    const goawaySeen = new Promise<void>((resolve) => (onGoaway = resolve));
    const admission = new TunnelAdmission(
      o.heartbeatTimeoutMs,
      () => this.comeUp(),
      (error) => {
        this.reason ??= error.message;
        this.session?.destroy();
        socket.destroy();
      },
    );
    this.admission = admission;
    const events: LinkEvents = {
      // The session's start proves nothing; a PING answered does (tunnel-admission.ts).
      ready: () => {
        const session = this.session;
        if (!session || session.closed) return;
        session.ping((err) => {
          if (!err) admission.pingAnswered();
        });
      },
      view: (view) => this.takeView(view),
      describe: (answer) => this.answerDescribe(answer, admission),
      served: o.served,
      // A GOAWAY ends this tunnel for new streams: the open ones finish on it
      // while the agent dials a new one, so the proxy is never left without this agent.
      goaway: (why, refused) => {
        this.reason ??= refused ? `the proxy refused the tunnel: ${refused.message}` : why;
        // Nothing more to describe on a tunnel that is ending: the describe stream, open for the
        // tunnel's life, would hold the session (and a draining proxy's drain) open once the last
        // client stream finished.
        this.describe?.end();
        onGoaway();
        if (!refused || this.refusal) return;
        this.refusal = new GateError(refused.code, `the proxy refused the tunnel: ${refused.message}`);
        this.emit('refused', this.refusal);
      },
      error: (err) => {
        this.reason ??= err.message;
        o.log.debug({ err }, 'tunnel session error');
      },
    };
    let current: ProxyLink;
    try {
      current = startFramedLink(socket, streams, events, o.maxStreams);
    } catch (err) {
      socket.destroy();
      throw err;
    }
    this.session = current;
    admission.start();
    current.once('close', () => {
      socket.destroy();
      this.finish();
    });
    startHeartbeat(current, {
      intervalMs: o.heartbeatIntervalMs,
      timeoutMs: o.heartbeatTimeoutMs,
      onTimeout: (why) => {
        this.reason ??= `heartbeat: ${why}`;
        o.log.warn({ code: ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, proxyId: this.proxyId }, `proxy heartbeat failed: ${why}`);
        current.destroy();
        socket.destroy();
      },
    });
    let sessionClosed = false;
    // Not events.once: that rejects on the 'error' a session destroyed with an error emits first.
    const closedNow = new Promise<void>((resolve) =>
      current.once('close', () => {
        sessionClosed = true;
        resolve();
      }),
    );
    await Promise.race([closedNow, goawaySeen]);
    admission.disarm();
    // After a GOAWAY the session lives on for the streams that finish on it: whether it is over is
    // read from its 'close' event.
    if (sessionClosed || current.closed) socket.destroy();
    this.up = false;
    this.ended = true;
    if (this.cameUp) return;
    if (this.refusal) throw this.refusal;
    if (admission.timedOut) throw admission.timedOut;
    throw new GateError(ErrorCodes.AGENT_STREAM_FAILED, `tunnel closed before the proxy admitted it: ${this.reason ?? 'closed'}`);
  }

  /** The proxy admitted the tunnel: `up`, unless it was refused or ended meanwhile. */
  private comeUp(): void {
    const session = this.session;
    if (this.refusal || !session || session.closed || this.ended || this.cameUp) return;
    this.admission?.disarm();
    this.up = true;
    this.cameUp = true;
    this.emit('up');
  }

  /** The proxy's cluster view (already answered by the link), never counted as a served stream. */
  private takeView(view: ClusterView | undefined): void {
    if (!view) {
      this.settings.log.warn('the proxy sent a malformed cluster view; ignored');
      return;
    }
    this.proxyId = view.proxyId;
    this.emit('view', view);
  }

  /**
   * Answers the proxy's describe request: the description as a JSON line, the stream kept open
   * for changes. The proxy ending its side is its verdict: admitted.
   */
  private answerDescribe(answer: DescribeAnswer, admission: TunnelAdmission): { verdict(): void; closed(): void } | undefined {
    if (this.describe) return undefined;
    admission.describeAsked();
    this.describe = answer;
    answer.write(descriptionLine(this.settings.description()));
    return {
      verdict: () => admission.admittedDescription(),
      closed: () => {
        if (this.describe === answer) this.describe = undefined;
      },
    };
  }

  /** Tells the proxy the agent's description changed (its services), if it asked for one. */
  describeAgain(): void {
    this.describe?.write(descriptionLine(this.settings.description()));
  }

  /**
   * Resolves true when the proxy answers a PING within `timeoutMs`, false when it does not (or the
   * session is gone): whether this tunnel's path is alive now rather than at its next heartbeat.
   */
  probe(timeoutMs: number): Promise<boolean> {
    const session = this.session;
    if (!session || session.closed || !this.up) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
      try {
        session.ping((err) => {
          clearTimeout(timer);
          resolve(!err);
        });
      } catch {
        clearTimeout(timer);
        resolve(false);
      }
    });
  }

  /**
   * connecting (dialling, or waiting for the proxy's admission), open (taking streams), closing
   * (no new streams: closed here, or the proxy sent GOAWAY, while open streams finish), closed.
   */
  get state(): ConnectionState {
    if (this.released) return 'closed';
    if (this.ended || (this.cameUp && !this.up)) return 'closing';
    return this.up ? 'open' : 'connecting';
  }

  /**
   * Closes the tunnel cleanly: GOAWAY (NO_ERROR), so the proxy stops opening streams and frees the
   * name at once; open streams get `graceMs` (default 5 s), then everything is destroyed. Resolves
   * when done; a second call returns the same promise.
   */
  close(options: CloseOptions & { reason?: string } = {}): Promise<void> {
    this.closing ??= this.closeGracefully(options.graceMs ?? DEFAULT_TUNNEL_GRACE_MS, options.reason ?? 'tunnel closed');
    return this.closing;
  }

  private async closeGracefully(graceMs: number, why: string): Promise<void> {
    this.reason ??= why;
    this.ended = true;
    this.up = false;
    const session = this.session;
    if (session && !session.closed) {
      // The describe stream stays open for the tunnel's life (later descriptions go on it): ended
      // here, or the session would wait the whole grace for it although no client stream is open.
      this.describe?.end();
      session.goAway();
      await within(this.finished, graceMs);
    }
    this.destroy(new GateError(ErrorCodes.SHUTDOWN, why));
  }

  /**
   * Ends it now: every open stream ends with the session, with `error` as the reason (a call
   * without one gives GATE_ERR_SHUTDOWN, so no stream reads as finished cleanly).
   */
  destroy(error: GateError = new GateError(ErrorCodes.SHUTDOWN, 'tunnel destroyed')): void {
    this.reason ??= error.message;
    this.ended = true;
    this.up = false;
    this.released = true;
    this.session?.destroy(error);
    this.socket?.destroy();
    if (!this.session) this.finish();
  }
}
