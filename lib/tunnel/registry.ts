import { EventEmitter, once } from 'node:events';
import { TLSSocket } from 'node:tls';
import { ErrorCodes, GateError, toGateError } from '../errors.js';
import { type CloseOptions, closeSessions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import type { CustomHandler } from '../handlers/types.js';
import { admitAgent, normalizeSerial, verifyErrorCode } from './admission.js';
import type { AgentLink } from './agent-link.js';
import type { TunnelStream } from './tunnel-stream.js';
import { type DialogueEntry, type DialogueHost, askDescription } from './admission-dialogue.js';
import { LocalAgentSessions, type AgentSessionEntry, type AgentSessions } from './agent-sessions.js';
import { FramedAgentLink } from './framed-agent-link.js';
import { refuseFramed } from './goaway-refusal.js';
import { normalizeClusterView, sameClusterView, type ClusterView } from './cluster-view.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, startHeartbeat } from './heartbeat.js';
import { LogLimiter } from '../log-limiter.js';
import { clientStreamCap } from './settings.js';

export type { DescribedAgent, OpenStreamOptions, TunnelRegistryOptions } from './registry-options.js';
import type { DescribedAgent, OpenStreamOptions, TunnelRegistryOptions } from './registry-options.js';

interface AgentSession extends AgentSessionEntry, DialogueEntry {
  // The whole tunnel: a sessions store sees only `usable` of it (AgentSessionEntry).
  link: AgentLink;
  socket: TLSSocket;
  /** The client certificate's serial (normalised), checked again by `revalidate`. */
  serial: string;
  /** Set while a duplicate's arrival has this session proving it is alive. */
  probing?: boolean;
  /** Set once the agent answered a cluster view with a refusal: an older agent, sent no more. */
  viewUnsupported?: boolean;
  /** Why it was refused after its session started: the socket ends with it, so the listener counts the code. */
  refusal?: GateError;
  /** Client streams open through this tunnel now, from `open` until each closes: what the cap counts. */
  clientStreams: number;
}

function describedOf(e: AgentSession): DescribedAgent {
  return {
    name: e.name,
    description: e.description && { ...e.description, services: e.description.services.map((s) => ({ ...s })) },
    since: e.since,
  };
}

/**
 * The proxy side of reverse tunnels: connected agents by name, each one session over the TLS
 * connection it dialled in, in gate-mux's tunnel framing (docs/tunnel-framing.md). The proxy opens
 * one stream per client connection routed to the agent. Events: `agent-connected` (name, once the
 * agent is admitted: certificate, name and self-description checked), `agent-described` (name,
 * when a connected agent's description changed),
 * `agent-disconnected` (name, reason) and `agent-refused` (GateError, and the agent's name once its
 * certificate named it).
 *
 * One name, one tunnel: an agent connecting under a name already held is refused
 * (GATE_ERR_AGENT_DUPLICATE) and the tunnel that holds it is left alone, so a copied certificate
 * cannot take over an agent's traffic. A restarted agent gets its name back as soon as the old
 * tunnel is gone: at once after a GOAWAY or a closed connection, within the heartbeat deadline
 * when the old path died silently.
 */
export class TunnelRegistry extends EventEmitter implements Closable {
  private readonly log: Logger;
  private readonly sessions: AgentSessions;
  private readonly all = new Set<AgentSession>();
  private readonly lifecycle = new Lifecycle();
  private view: ClusterView | undefined;
  private draining = false;
  /**
   * Streams opened through agents, and how many ended with a reset (sent or received) rather
   * than a FIN both ways. Resets are what an agent rate-limits (rapid reset), on either protocol.
   * `busy`: clients refused with GATE_ERR_AGENT_BUSY, no stream opened (the tunnel was at its cap).
   */
  readonly streamStats = { opened: 0, reset: 0, busy: 0 };
  /** Agents refused so far, by GATE_ERR_* code (a metric). */
  readonly refusals: Record<string, number> = {};
  /** Refusals repeat with every retry of every refused agent: logged per code with a limit. */
  private readonly refusalLog: LogLimiter;
  /** What the admission dialogue (admission-dialogue.ts) asks of the registry. */
  private readonly dialogueHost: DialogueHost<AgentSession>;

  constructor(private readonly options: TunnelRegistryOptions = {}) {
    super();
    this.log = componentLogger(options.logger, 'tunnel-registry');
    this.sessions = options.sessions ?? new LocalAgentSessions();
    this.refusalLog = new LogLimiter(this.log);
    this.dialogueHost = {
      timeoutMs: options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS,
      version: options.version,
      log: this.log,
      refusalLog: this.refusalLog,
      claim: (entry) => this.sessions.claim(entry),
      refuse: (entry, error) => this.refuseSession(entry, error),
      count: (error) => this.count(error),
      end: (entry) => this.endTunnel(entry),
      admitted: (name) => this.emit('agent-connected', name),
      described: (name) => this.emit('agent-described', name),
    };
  }

  /** The agents connected now, with what each said about itself. */
  describedAgents(): DescribedAgent[] {
    return [...this.all].filter((e) => e.admitted && this.sessions.get(e.name) === e).map(describedOf);
  }

  /** One connected agent with what it said about itself, or undefined when `name` is not connected here. */
  describedAgent(name: string): DescribedAgent | undefined {
    // By the name's holder, not a scan: the cluster member asks once per agent at every refresh.
    const entry = this.sessions.get(name) as AgentSession | undefined;
    return entry?.admitted && this.all.has(entry) ? describedOf(entry) : undefined;
  }

  /** Names of the agents connected now. */
  agents(): string[] {
    return this.sessions.names();
  }

  has(name: string): boolean {
    return this.sessions.get(name) !== undefined;
  }

  /** Resolves once `name` is connected (at once if it is). */
  async waitFor(name: string, timeoutMs = 30_000): Promise<void> {
    if (this.has(name)) return;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      for (;;) {
        const [connected] = (await once(this, 'agent-connected', { signal })) as [string];
        if (connected === name) return;
      }
    } catch (err) {
      throw new GateError(ErrorCodes.AGENT_NOT_CONNECTED, `agent ${name} did not connect within ${timeoutMs} ms`, { cause: err });
    }
  }

  /**
   * The handler for the tunnel route, after `terminate` with `requestCert: true` (see
   * `tunnelEndpoint`): it takes the TLS socket and registers the agent it authenticates.
   */
  handler(): CustomHandler {
    return {
      kind: 'custom',
      handle: (socket) => {
        if (!(socket instanceof TLSSocket)) {
          throw new GateError(ErrorCodes.AGENT_IDENTITY, 'the tunnel handler needs the TLS socket (put it right after terminate)');
        }
        this.accept(socket);
      },
    };
  }

  /**
   * Registers the agent on a TLS socket whose client certificate the handshake requested. The name
   * comes from the certificate only. A refused
   * agent (see `admitAgent`, and GATE_ERR_AGENT_DUPLICATE) is told why in a GOAWAY, the socket is
   * closed with the error (so the listener records its code) and the error is returned; undefined
   * when the agent was registered.
   */
  accept(socket: TLSSocket): GateError | undefined {
    const remote = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    let name: string;
    let serial = '';
    try {
      if (this.lifecycle.ending) throw new GateError(ErrorCodes.SHUTDOWN, 'tunnel registry is closed');
      if (this.draining)
        throw new GateError(ErrorCodes.DRAINING, 'this proxy is draining (shutting down): connect to another proxy of the cluster');
      const peer = socket.getPeerCertificate();
      serial = normalizeSerial(peer?.serialNumber ?? '');
      name = admitAgent(
        {
          authorized: socket.authorized,
          authorizationError: verifyErrorCode(socket.authorizationError),
          certificate: peer && Object.keys(peer).length > 0 ? peer : undefined,
        },
        this.options.isRevoked ?? (() => false),
      );
    } catch (err) {
      return this.refuse(socket, toGateError(err, ErrorCodes.AGENT_IDENTITY), remote);
    }
    const duplicate = (): GateError =>
      new GateError(
        ErrorCodes.AGENT_DUPLICATE,
        `agent ${name} is already connected (from ${this.sessions.get(name)?.remote ?? '?'}); one tunnel per name`,
      );
    const held = this.sessions.get(name);
    // Checked before the session starts, so the refusal can still be told over this socket.
    if (held?.link.usable) {
      // The holder may be a path that died without a FIN (the agent restarted elsewhere): make
      // it prove it is alive now rather than at its next heartbeat, so the name frees sooner.
      const local = [...this.all].find((e) => e === held);
      if (local) this.probe(local);
      return this.refuse(socket, duplicate(), remote);
    }
    const link: AgentLink = new FramedAgentLink(socket, name);
    const entry: AgentSession = { name, link, socket, remote, since: Date.now(), serial, clientStreams: 0 };
    this.all.add(entry);
    // Both queued now, before the agent's first PING can be answered (docs/tunnel-framing.md): the
    // agent knows by then whether it waits for a verdict.
    this.sendView(entry);
    askDescription(entry, this.dialogueHost, duplicate);
    let reason: string | undefined;
    const release = (why: string): void => {
      if (!this.sessions.release(entry)) return;
      this.log.info({ agent: name, remote, reason: why }, 'agent disconnected');
      this.emit('agent-disconnected', name, why);
    };
    link.on('error', (err: Error) => {
      reason ??= err.message;
      this.log.debug({ agent: name, err }, 'agent session error');
    });
    // An agent going away cleanly says so with GOAWAY: its name is free for its successor at
    // once, and new clients fail with GATE_ERR_AGENT_OFFLINE instead of queueing behind it.
    link.on('goaway', (why: string) => {
      reason ??= why;
      release(reason);
    });
    startHeartbeat(link.peer, {
      intervalMs: this.options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
      timeoutMs: this.options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS,
      onTimeout: (why) => {
        reason ??= `heartbeat: ${why}`;
        this.log.warn({ agent: name, code: ErrorCodes.AGENT_HEARTBEAT_TIMEOUT }, `agent heartbeat failed: ${why}`);
        this.endTunnel(entry, new GateError(ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, `agent ${name}: ${why}`));
      },
    });
    link.once('close', () => {
      this.all.delete(entry);
      release(entry.endedBy ?? reason ?? 'agent closed the tunnel');
      // A refusal destroys the socket itself, with its error, once the GOAWAY had its chance.
      if (!entry.refusal) socket.destroy();
    });
    // The TLS socket comes from a half-open client (the multiplexer relays each direction's FIN
    // on its own), so the agent's FIN without a GOAWAY first (a process killed, an HTTP proxy
    // dropping its CONNECT, Node 22+'s session.destroy) would only end the readable side and the
    // session would wait for its heartbeat. A peer that sends no more frames cannot answer one:
    // the tunnel is over now. Said first, before the session hears of the FIN (a framed session
    // ends itself on it, and would give its own words).
    socket.prependOnceListener('end', () => {
      reason ??= 'agent closed the connection';
    });
    socket.once('end', () => this.endTunnel(entry));
    return undefined;
  }

  /** Refuses an agent whose session has started: GOAWAY with the code, then the connection ends. */
  private refuseSession(entry: AgentSession, error: GateError): void {
    this.count(error);
    this.refusalLog.log(
      'warn',
      error.code,
      { agent: entry.name, remote: entry.remote, code: error.code },
      `agent refused: ${error.message}`,
    );
    this.emit('agent-refused', error, entry.name);
    entry.endedBy = error.message;
    entry.refusal = error;
    entry.link.refuse(error);
  }

  private count(error: GateError): void {
    this.refusals[error.code] = (this.refusals[error.code] ?? 0) + 1;
  }

  /**
   * What every agent is told about the cluster: this proxy's id and the ids of the
   * live proxies. Sent to each agent at admission and to every connected agent whenever it
   * changes, so an agent that reaches the proxies through a load balancer can keep its tunnels on
   * distinct proxies and forget proxies that are gone. Without a view (a proxy on its own) agents
   * are told nothing and keep one tunnel. GATE_ERR_INVALID_ARGUMENT for ids that are not short
   * tokens of `[A-Za-z0-9._:-]`.
   */
  setClusterView(view: { proxyId: string; proxyIds: readonly string[] }): void {
    const next = normalizeClusterView(view);
    if (!next)
      throw new GateError(
        ErrorCodes.INVALID_ARGUMENT,
        `not a usable cluster view: proxy ids must be 1-128 characters of [A-Za-z0-9._:-], at most 1024 of them (${JSON.stringify(view.proxyId)})`,
      );
    if (sameClusterView(next, this.view)) return;
    this.view = next;
    this.log.debug({ proxyId: next.proxyId, proxies: next.proxyIds.length }, 'cluster view changed');
    for (const entry of this.all) this.sendView(entry);
  }

  /** The view agents are told, if any. */
  get clusterView(): ClusterView | undefined {
    return this.view && { proxyId: this.view.proxyId, proxyIds: [...this.view.proxyIds] };
  }

  /**
   * Tells one agent the view (each link says how its protocol carries it). An agent that answers
   * with a refusal (an older agent) is sent no more views and keeps one tunnel, as before. Not
   * counted in `streamStats`: no client is behind it.
   */
  private sendView(entry: AgentSession): void {
    const view = this.view;
    if (!view || entry.viewUnsupported || !entry.link.usable) return;
    try {
      entry.link.sendView(view, (status) => {
        entry.viewUnsupported = true;
        this.log.info({ agent: entry.name, status }, 'the agent does not take cluster views (an older agent): it keeps one tunnel');
      });
    } catch (err) {
      this.log.debug({ agent: entry.name, err }, 'cluster view not sent');
    }
  }

  /**
   * Checks the connected agents again, after the revocation list changed (a configuration
   * reload): a session whose certificate is now revoked is ended at once, streams included, and
   * the agent told why (GATE_ERR_AGENT_CERT_REVOKED in the GOAWAY). Returns the agents ended.
   */
  revalidate(): string[] {
    const ended: string[] = [];
    const isRevoked = this.options.isRevoked ?? (() => false);
    for (const entry of this.all) {
      if (entry.link.peer.closed || !isRevoked(entry.serial)) continue;
      const error = new GateError(ErrorCodes.AGENT_CERT_REVOKED, `the agent certificate (serial ${entry.serial}) has been revoked`);
      this.log.warn({ agent: entry.name, remote: entry.remote, code: error.code }, `agent tunnel ended: ${error.message}`);
      entry.endedBy = error.message;
      if (this.sessions.release(entry) || entry.admitted) this.emit('agent-disconnected', entry.name, error.message);
      entry.link.tell(error);
      // Give the GOAWAY a moment on the wire, then cut every stream: a revoked agent carries nothing more.
      const timer = setTimeout(() => this.endTunnel(entry, error), 200);
      timer.unref();
      ended.push(entry.name);
    }
    return ended;
  }

  /** One PING with the heartbeat deadline; a session that does not answer is torn down. */
  private probe(entry: AgentSession): void {
    if (entry.probing || !entry.link.usable) return;
    entry.probing = true;
    const timeoutMs = this.options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS;
    const fail = (): void => {
      entry.endedBy = `heartbeat: no PING answer within ${timeoutMs} ms after a second agent claimed the name`;
      this.log.warn({ agent: entry.name, code: ErrorCodes.AGENT_HEARTBEAT_TIMEOUT }, entry.endedBy);
      // Free the name now, as revalidate() does: the session's 'close' (which would release it)
      // can come late on a dead path, and meanwhile every claim of the successor was refused.
      if (this.sessions.release(entry)) this.emit('agent-disconnected', entry.name, entry.endedBy);
      this.endTunnel(entry, new GateError(ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, `agent ${entry.name}: ${entry.endedBy}`));
    };
    const timer = setTimeout(fail, timeoutMs);
    timer.unref();
    try {
      entry.link.peer.ping((err) => {
        clearTimeout(timer);
        entry.probing = false;
        if (err && !entry.link.peer.closed) fail();
      });
    } catch {
      clearTimeout(timer);
      fail();
    }
  }

  /** Tells a refused agent why (in a GOAWAY), then closes its connection with the error. */
  private refuse(socket: TLSSocket, error: GateError, remote: string): GateError {
    this.count(error);
    this.refusalLog.log('warn', error.code, { remote, code: error.code }, `agent refused: ${error.message}`);
    this.emit('agent-refused', error);
    refuseFramed(socket, error);
    return error;
  }

  /**
   * Opens a stream to `target` (`host:port`) through agent `name` and resolves once the agent has
   * connected to it. Errors: GATE_ERR_AGENT_OFFLINE (no such agent now),
   * GATE_ERR_AGENT_TARGET_DENIED (outside the agent's policy), GATE_ERR_AGENT_STREAM_FAILED (the
   * agent could not reach the target, went away, or did not answer in time).
   */
  open(name: string, target: string, options: OpenStreamOptions = {}): Promise<TunnelStream> {
    const entry = this.sessions.get(name) as AgentSession | undefined;
    if (!entry?.link.usable) {
      return Promise.reject(new GateError(ErrorCodes.AGENT_OFFLINE, `agent ${name} is offline (not connected to this proxy)`));
    }
    const where = `agent ${name} -> ${target}`;
    // The cap (settings.ts): a tunnel at it takes no more, and the client is refused now, with no
    // stream opened, rather than the agent refusing the open and counting it as abuse. The cluster
    // dialer tries the agent's tunnels on other proxies before the client sees this.
    if (entry.clientStreams >= clientStreamCap(entry.link.streamLimit)) return Promise.reject(this.busy(entry, where));
    const timeoutMs = options.timeoutMs ?? this.options.openTimeoutMs ?? 15_000;
    const { link } = entry;
    let opening: Promise<TunnelStream>;
    try {
      opening = link.connect(
        { target, client: options.client, firstBytes: options.firstBytes },
        {
          timeoutMs,
          cancel: options.cancel ?? options.signal,
          where,
          refused: (refusal) => {
            const code = refusal.code === ErrorCodes.AGENT_TARGET_DENIED ? ErrorCodes.AGENT_TARGET_DENIED : ErrorCodes.AGENT_STREAM_FAILED;
            return new GateError(code, `${where}: ${refusal.message}${refusal.code && refusal.code !== code ? ` (${refusal.code})` : ''}`);
          },
          lost: (why) => new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${where}: ${why}`),
          timedOut: () => new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${where}: no answer within ${timeoutMs} ms`),
        },
        (reset) => {
          entry.clientStreams--;
          if (reset) this.streamStats.reset++;
        },
      );
    } catch (err) {
      // The session's own check of the agent's limit (its HELLO): only when the cap leaves no
      // room for the proxy's own streams (an agent that takes fewer than five); refused as busy.
      if (err instanceof GateError && err.code === ErrorCodes.AGENT_BUSY) return Promise.reject(this.busy(entry, where));
      return Promise.reject(new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${where}: ${(err as Error).message}`, { cause: err }));
    }
    entry.clientStreams++;
    this.streamStats.opened++;
    return opening;
  }

  /**
   * The client streams this proxy opens at once through `name`'s tunnel (settings.ts: a few below
   * the limit its agent gave in its HELLO), or undefined when the agent is not connected here.
   */
  streamCap(name: string): number | undefined {
    const entry = this.sessions.get(name) as AgentSession | undefined;
    return entry ? clientStreamCap(entry.link.streamLimit) : undefined;
  }

  /** A client refused because `entry`'s tunnel is at its cap: counted, logged at a bounded rate. */
  private busy(entry: AgentSession, where: string): GateError {
    this.streamStats.busy++;
    const error = new GateError(
      ErrorCodes.AGENT_BUSY,
      `${where}: agent ${entry.name} is busy: its tunnel to this proxy carries ${entry.clientStreams} client streams, the most it is given (it takes ${entry.link.streamLimit} streams at once)`,
    );
    this.refusalLog.log('warn', error.code, { agent: entry.name, remote: entry.remote, code: error.code }, error.message);
    return error;
  }

  /**
   * While on, new tunnels are refused with GATE_ERR_DRAINING (told in the GOAWAY, so the agent
   * knows to go elsewhere) and the tunnels already up are left to `goAway`.
   */
  setDraining(on: boolean): void {
    this.draining = on;
  }

  /** Tells every agent the proxy is going away (GOAWAY NO_ERROR): no new streams, open ones may finish. */
  goAway(): void {
    for (const entry of this.all) if (entry.link.usable) entry.link.goAway();
  }

  /** open, closing (agents told GOAWAY, their streams finishing), closed (every session gone). */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /**
   * Refuses new tunnels; with `graceMs`, tells every agent GOAWAY and gives open streams that long
   * to finish; then destroys every agent session (and so every stream through them). Resolves
   * once every session has closed; a second call returns the same promise.
   */
  close(options: CloseOptions = {}): Promise<void> {
    const sessions = [...this.all].map((entry) => entry.link.peer);
    return this.lifecycle.close(() => closeSessions(sessions, options, { goAway: () => this.goAway(), endAll: () => this.endAll() }));
  }

  /** Destroys every agent session now (streams reset with `err`); new tunnels are refused. */
  destroy(err?: GateError): void {
    if (this.lifecycle.destroy()) this.endAll(err);
  }

  private endAll(error?: GateError): void {
    this.refusalLog.flush();
    for (const entry of this.all) this.endTunnel(entry, error);
  }

  /**
   * Ends an agent's tunnel now, every stream through it included, with `error` as the session's.
   * The session's 'close' then releases the name and says why, as for a tunnel the agent ended;
   * the socket goes too: the TLS socket of a half-open client would otherwise outlive a session
   * that can send nothing more.
   */
  private endTunnel(entry: AgentSession, error?: GateError): void {
    entry.link.destroy(error);
    entry.socket.destroy();
  }
}
