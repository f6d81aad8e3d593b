import { EventEmitter, once } from 'node:events';
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { TLSSocket } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import type { CustomHandler } from '../handlers/types.js';
import { agentNameOf } from './agent-identity.js';
import { jsStreamOver } from './js-stream.js';
import { connectRequestHeaders, h2ErrorName, readRefusal } from './connect-request.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, startHeartbeat } from './heartbeat.js';
import { TUNNEL_SESSION_SETTINGS, TUNNEL_WINDOW_BYTES } from './settings.js';

export interface TunnelRegistryOptions {
  logger?: Logger;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /** Milliseconds an agent has to answer a stream (dial its target) before the open fails (default 15 s). */
  openTimeoutMs?: number;
}

export interface OpenStreamOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

interface AgentSession {
  name: string;
  session: ClientHttp2Session;
  socket: TLSSocket;
  remote: string;
  since: number;
}

/**
 * The proxy side of reverse tunnels: connected agents by name, each one HTTP/2 session over the
 * TLS connection it dialled in. The proxy is that session's HTTP/2 client and opens one CONNECT
 * stream per client connection routed to the agent. Events: `agent-connected` (name) and
 * `agent-disconnected` (name, reason).
 *
 * An agent that reconnects under a name already held replaces the old session: the old one is
 * most likely half-dead (its network path broke and its heartbeat has not yet noticed), so new
 * streams go to the new session and the old one is closed gracefully (GOAWAY), letting its
 * streams finish.
 */
export class TunnelRegistry extends EventEmitter {
  private readonly log: Logger;
  private readonly sessions = new Map<string, AgentSession>();
  private readonly all = new Set<AgentSession>();
  private closed = false;

  constructor(private readonly options: TunnelRegistryOptions = {}) {
    super();
    this.log = componentLogger(options.logger, 'tunnel-registry');
  }

  /** Names of the agents connected now. */
  agents(): string[] {
    return [...this.sessions.keys()];
  }

  has(name: string): boolean {
    return this.sessions.has(name);
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
   * Registers the agent on an authenticated TLS socket. The name comes from the verified client
   * certificate only; throws GATE_ERR_AGENT_IDENTITY when the socket is not authorized or the
   * certificate names no agent.
   */
  accept(socket: TLSSocket): string {
    if (this.closed) throw new GateError(ErrorCodes.SHUTDOWN, 'tunnel registry is closed');
    if (!socket.authorized) {
      throw new GateError(ErrorCodes.AGENT_IDENTITY, `agent certificate not verified: ${String(socket.authorizationError ?? 'no certificate')}`);
    }
    const peer = socket.getPeerCertificate();
    const name = agentNameOf({ commonName: peer.subject?.CN, subjectAltName: peer.subjectaltname });
    const remote = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    const session = connect('http://agent.tunnel', {
      createConnection: () => jsStreamOver(socket),
      settings: TUNNEL_SESSION_SETTINGS,
    });
    const entry: AgentSession = { name, session, socket, remote, since: Date.now() };
    const previous = this.sessions.get(name);
    this.sessions.set(name, entry);
    this.all.add(entry);
    if (previous) {
      this.log.info({ agent: name, remote, previous: previous.remote }, 'agent reconnected: the new session replaces the old');
      previous.session.close();
    }
    let reason: string | undefined;
    session.on('error', (err) => {
      reason ??= err.message;
      this.log.debug({ agent: name, err }, 'agent session error');
    });
    session.once('connect', () => {
      if (!session.destroyed) session.setLocalWindowSize(TUNNEL_WINDOW_BYTES);
    });
    startHeartbeat(session, {
      intervalMs: this.options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
      timeoutMs: this.options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS,
      onTimeout: (why) => {
        reason ??= `heartbeat: ${why}`;
        this.log.warn({ agent: name, code: ErrorCodes.AGENT_HEARTBEAT_TIMEOUT }, `agent heartbeat failed: ${why}`);
        session.destroy(new GateError(ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, `agent ${name}: ${why}`));
        socket.destroy();
      },
    });
    session.once('close', () => {
      this.all.delete(entry);
      // A replaced session must not unregister its successor.
      if (this.sessions.get(name) === entry) {
        this.sessions.delete(name);
        const why = reason ?? 'agent closed the tunnel';
        this.log.info({ agent: name, remote, reason: why }, 'agent disconnected');
        this.emit('agent-disconnected', name, why);
      }
      socket.destroy();
    });
    this.log.info({ agent: name, remote }, 'agent connected');
    this.emit('agent-connected', name);
    return name;
  }

  /**
   * Opens a stream to `target` (`host:port`) through agent `name` and resolves once the agent has
   * connected to it. Errors: GATE_ERR_AGENT_NOT_CONNECTED (no such agent now),
   * GATE_ERR_AGENT_TARGET_DENIED (outside the agent's policy), GATE_ERR_AGENT_STREAM_FAILED (the
   * agent could not reach the target, went away, or did not answer in time).
   */
  open(name: string, target: string, options: OpenStreamOptions = {}): Promise<ClientHttp2Stream> {
    const entry = this.sessions.get(name);
    if (!entry || entry.session.closed || entry.session.destroyed) {
      return Promise.reject(new GateError(ErrorCodes.AGENT_NOT_CONNECTED, `agent ${name} is not connected`));
    }
    const where = `agent ${name} -> ${target}`;
    let stream: ClientHttp2Stream;
    try {
      stream = entry.session.request(connectRequestHeaders(target), { endStream: false });
    } catch (err) {
      return Promise.reject(new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${where}: ${(err as Error).message}`, { cause: err }));
    }
    const timeoutMs = options.timeoutMs ?? this.options.openTimeoutMs ?? 15_000;
    return new Promise<ClientHttp2Stream>((resolve, reject) => {
      const done = (err: GateError | undefined): void => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        stream.removeListener('response', onResponse);
        stream.removeListener('close', onClose);
        if (!err) return resolve(stream);
        if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
        reject(err);
      };
      const onResponse = (headers: IncomingHttpHeaders): void => {
        const status = headers[':status'];
        if (Number(status) === 200) return done(undefined);
        const refusal = readRefusal(headers);
        const code = refusal.code === ErrorCodes.AGENT_TARGET_DENIED ? ErrorCodes.AGENT_TARGET_DENIED : ErrorCodes.AGENT_STREAM_FAILED;
        done(new GateError(code, `${where}: ${refusal.message}${refusal.code && refusal.code !== code ? ` (${refusal.code})` : ''}`));
      };
      const onClose = (): void => done(new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${where}: ${this.lossReason(entry, stream)}`));
      const onAbort = (): void => done(new GateError(ErrorCodes.DIAL_ABORTED, `${where}: aborted`, { cause: options.signal?.reason }));
      const timer = setTimeout(() => done(new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${where}: no answer within ${timeoutMs} ms`)), timeoutMs);
      stream.on('error', () => {}); // the outcome is read from 'close' and rstCode
      stream.once('response', onResponse);
      stream.once('close', onClose);
      if (options.signal?.aborted) onAbort();
      else options.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Why a stream of `entry` ended early, in words. */
  lossReason(entry: { name: string; session: ClientHttp2Session }, stream: ClientHttp2Stream): string {
    if (entry.session.destroyed || entry.session.closed) return `agent ${entry.name} disconnected`;
    return `stream reset by the agent (${h2ErrorName(stream.rstCode)})`;
  }

  /** Session of a connected agent, for `viaTunnel`'s messages. */
  sessionOf(name: string): ClientHttp2Session | undefined {
    return this.sessions.get(name)?.session;
  }

  /** Destroys every agent session (and so every stream through them). */
  close(): void {
    this.closed = true;
    for (const entry of this.all) {
      entry.session.destroy();
      entry.socket.destroy();
    }
  }
}
