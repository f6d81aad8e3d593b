import { EventEmitter, once } from 'node:events';
import { X509Certificate } from 'node:crypto';
import { createServer, type Http2Server, type ServerHttp2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { dialTls } from '../client/dial-tls.js';
import type { ProxyConfig } from '../client/proxy-config.js';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { ALPN_REVERSE_TUNNEL } from '../wire/names.js';
import { agentNameOf, commonNameOfSubject } from './agent-identity.js';
import { readRefusalDebugData } from './admission.js';
import { h2ErrorName } from './connect-request.js';
import { serveAgentStream } from './agent-stream.js';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from './backoff.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, startHeartbeat } from './heartbeat.js';
import { TUNNEL_SESSION_SETTINGS, TUNNEL_WINDOW_BYTES } from './settings.js';

export interface AgentOptions {
  /** The proxy's tunnel endpoint, `host:port` (the shared port, or the legacy tunnel port). */
  proxy: string;
  /** The agent's name. Must be the name its certificate carries (CN, else first DNS SAN). */
  name: string;
  /** Client certificate and key issued by the proxy's CA (`ca.issue({commonName: name, usage: 'client'})`). */
  cert: string | Buffer;
  key: string | Buffer;
  /** CA that signed the proxy's server certificate. */
  ca: string | Buffer | Array<string | Buffer>;
  /** SNI and the name the proxy's certificate is checked against (default: the proxy host). */
  serverName?: string;
  /** Where HTTPS_PROXY / HTTP_PROXY / NO_PROXY come from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Override the environment: the proxy to dial through, or null for direct. */
  dialProxy?: ProxyConfig | null;
  /** Targets (`host:port`) this agent serves. Ignored when `allow` is given. */
  resources?: string[];
  /** Policy for targets the proxy asks for. Default: exactly `resources`; nothing else. */
  allow?: (target: string) => boolean;
  logger?: Logger;
  /** Deadline for dialling the proxy and the TLS handshake (default 10 s). */
  dialTimeoutMs?: number;
  /** Deadline for the TCP connect to a target (default 10 s). */
  targetDialTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /** Reconnect backoff (default 0.5 s growing to 30 s, full jitter). */
  backoff?: BackoffOptions;
  /** A session that stayed up this long resets the backoff (default 10 s). */
  stableAfterMs?: number;
  /** Source of jitter, [0, 1) (default Math.random). */
  random?: () => number;
}

export interface AgentConnectedEvent {
  /** The environment proxy the tunnel went through, redacted, or `direct`. */
  via: string;
  /** How many times the tunnel has come up, this one included. */
  connections: number;
}

/**
 * A running agent. Events: `connected` (AgentConnectedEvent) once the proxy has registered it (its
 * SETTINGS and the answer to a first PING arrived); `disconnected` ({reason}) when the session
 * ends; `refused` (GateError) when the proxy refuses the tunnel, with the proxy's code
 * (GATE_ERR_AGENT_CERT_EXPIRED, _REVOKED, _UNTRUSTED, GATE_ERR_AGENT_DUPLICATE, ...).
 */
export interface TunnelAgent extends EventEmitter {
  readonly name: string;
  readonly connected: boolean;
  /** Times the tunnel has come up so far. */
  readonly connections: number;
  /** Target connections open right now. */
  readonly openStreams: number;
  /** Streams the proxy has opened in this agent's tunnels so far. */
  readonly streamsServed: number;
  /** Resolves once the tunnel is up (at once if it is); rejects after `timeoutMs`. */
  waitConnected(timeoutMs?: number): Promise<AgentConnectedEvent>;
  /**
   * Stops reconnecting and destroys the session, its streams and their target sockets. With
   * `graceMs`, first closes the tunnel cleanly: GOAWAY (NO_ERROR) so the proxy stops opening
   * streams and frees the name at once, then up to `graceMs` for open streams to finish.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
  /** Use this certificate and key from the next tunnel connection on (after a renewal). */
  setIdentity(identity: { cert: string | Buffer; key: string | Buffer }): void;
}

function defaultPolicy(resources: readonly string[]): (target: string) => boolean {
  const allowed = new Set(resources.map((r) => r.toLowerCase()));
  return (target) => allowed.has(target.toLowerCase());
}

/** Checks up front that the certificate names this agent: a mismatch would register it under another name. */
function certificateName(cert: string | Buffer): string {
  const x509 = new X509Certificate(cert);
  return agentNameOf({ commonName: commonNameOfSubject(x509.subject), subjectAltName: x509.subjectAltName });
}

class Agent extends EventEmitter implements TunnelAgent {
  readonly name: string;
  connected = false;
  connections = 0;
  streamsServed = 0;
  private readonly log: Logger;
  private readonly allow: (target: string) => boolean;
  private readonly targets = new Set<Socket>();
  private readonly h2: Http2Server;
  private stopped = false;
  private session: ServerHttp2Session | undefined;
  private socket: TLSSocket | undefined;
  private readonly abort = new AbortController();
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private current: AgentConnectedEvent | undefined;
  private identity: { cert: string | Buffer; key: string | Buffer };
  /** Sessions the proxy sent GOAWAY on, finishing their streams while a new tunnel takes over. */
  private readonly draining = new Set<{ session: ServerHttp2Session; socket: TLSSocket }>();

  constructor(private readonly options: AgentOptions) {
    super();
    this.name = options.name;
    this.log = componentLogger(options.logger, 'tunnel-agent').child({ agent: options.name });
    this.allow = options.allow ?? defaultPolicy(options.resources ?? []);
    this.identity = { cert: options.cert, key: options.key };
    // The agent is the HTTP/2 *server* on a connection it dialled: the proxy is the one that opens
    // streams (one per client connection), so it must be the client (RFC 9113 §5.1.1: clients open
    // odd-numbered streams). The server object only builds sessions; it never listens.
    this.h2 = createServer({ settings: TUNNEL_SESSION_SETTINGS });
  }

  get openStreams(): number {
    return this.targets.size;
  }

  start(): void {
    this.loop = this.run();
  }

  async waitConnected(timeoutMs = 30_000): Promise<AgentConnectedEvent> {
    if (this.connected && this.current) return this.current;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const [event] = (await once(this, 'connected', { signal })) as [AgentConnectedEvent];
      return event;
    } catch (err) {
      throw new GateError(ErrorCodes.AGENT_NOT_CONNECTED, `agent ${this.name} not connected within ${timeoutMs} ms`, { cause: err });
    }
  }

  setIdentity(identity: { cert: string | Buffer; key: string | Buffer }): void {
    const named = certificateName(identity.cert);
    if (named !== this.name) throw new GateError(ErrorCodes.AGENT_IDENTITY, `agent ${JSON.stringify(this.name)} was given a certificate for ${JSON.stringify(named)}`);
    this.identity = { cert: identity.cert, key: identity.key };
  }

  async stop(options: { graceMs?: number } = {}): Promise<void> {
    if (this.stopped) return this.loop;
    this.stopped = true;
    this.abort.abort(new GateError(ErrorCodes.SHUTDOWN, 'agent stopping'));
    this.wake?.();
    const session = this.session;
    if (options.graceMs !== undefined && session && !session.destroyed && !session.closed) {
      // close() sends GOAWAY NO_ERROR and waits for open streams; the timer bounds the wait.
      const closed = once(session, 'close').then(() => undefined);
      session.close();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, options.graceMs)))]);
      clearTimeout(timer);
    }
    // With an error, Node resets each open stream with INTERNAL_ERROR before the socket goes;
    // without one it would send RST_STREAM NO_ERROR, which reads as a finished stream.
    this.session?.destroy(new GateError(ErrorCodes.SHUTDOWN, 'agent stopping'));
    this.socket?.destroy();
    for (const old of this.draining) {
      old.session.destroy(new GateError(ErrorCodes.SHUTDOWN, 'agent stopping'));
      old.socket.destroy();
    }
    for (const socket of this.targets) socket.destroy();
    await this.loop;
  }

  private async run(): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      const started = Date.now();
      try {
        await this.connectOnce();
      } catch (err) {
        if (this.stopped) break;
        const code = (err as GateError).code;
        this.log.warn({ err, code, attempt }, 'tunnel connection failed');
      }
      if (this.stopped) break;
      if (Date.now() - started >= (this.options.stableAfterMs ?? 10_000)) attempt = 0;
      const delay = backoffDelay(attempt++, this.options.backoff ?? DEFAULT_BACKOFF, this.options.random);
      this.log.info({ delayMs: delay, attempt }, 'reconnecting after backoff');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, delay);
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        this.wake = done;
      });
      this.wake = undefined;
    }
  }

  /** One tunnel: dial, serve streams until the session ends. Resolves on a clean end, throws on a failed dial. */
  private async connectOnce(): Promise<void> {
    const o = this.options;
    const { socket, via } = await dialTls(o.proxy, {
      alpn: [ALPN_REVERSE_TUNNEL],
      requireAlpn: true,
      ca: o.ca,
      cert: this.identity.cert,
      key: this.identity.key,
      ...(o.serverName === undefined ? {} : { serverName: o.serverName }),
      ...(o.env === undefined ? {} : { env: o.env }),
      ...(o.dialProxy === undefined ? {} : { proxy: o.dialProxy }),
      ...(o.dialTimeoutMs === undefined ? {} : { timeoutMs: o.dialTimeoutMs }),
      ...(o.logger === undefined ? {} : { logger: o.logger }),
      signal: this.abort.signal,
    });
    if (this.stopped) {
      socket.destroy();
      return;
    }
    const viaText = via?.display ?? 'direct';
    this.socket = socket;
    socket.on('error', (err) => this.log.debug({ err }, 'tunnel socket error'));
    let session: ServerHttp2Session | undefined;
    const onSession = (s: ServerHttp2Session): void => {
      session = s;
    };
    // 'session' is emitted synchronously from the 'connection' handler.
    this.h2.once('session', onSession);
    this.h2.emit('connection', socket);
    this.h2.removeListener('session', onSession);
    if (!session) {
      socket.destroy();
      throw new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'HTTP/2 session could not start on the tunnel');
    }
    this.session = session;
    const current = session;
    let reason: string | undefined;
    current.on('error', (err) => {
      reason ??= err.message;
      this.log.debug({ err }, 'tunnel session error');
    });
    current.on('stream', (stream, headers) => {
      this.streamsServed++;
      serveAgentStream(stream, headers, {
        allow: this.allow,
        dialTimeoutMs: o.targetDialTimeoutMs ?? 10_000,
        log: this.log,
        track: (target) => {
          this.targets.add(target);
          target.once('close', () => this.targets.delete(target));
        },
      });
    });
    // A proxy that refuses the agent (foreign CA, expired, revoked, duplicate name) says why in a
    // GOAWAY's debug data, right after the SETTINGS every HTTP/2 session starts with.
    let refusal: GateError | undefined;
    let onGoaway = (): void => {};
    const goawaySeen = new Promise<void>((resolve) => (onGoaway = resolve));
    current.on('goaway', (code: number, _last: number, data?: Buffer) => {
      const refused = readRefusalDebugData(data);
      // A GOAWAY ends this tunnel for new streams (RFC 9113 §6.8): the open ones finish on it
      // while the agent dials a new one, so the proxy is never left without this agent.
      reason ??= refused ? `the proxy refused the tunnel: ${refused.message}` : `proxy sent GOAWAY (${h2ErrorName(code)})`;
      onGoaway();
      if (!refused || refusal) return;
      refusal = new GateError(refused.code, `the proxy refused the tunnel: ${refused.message}`);
      this.log.warn({ code: refusal.code }, refusal.message);
      this.emit('refused', refusal);
    });
    // SETTINGS alone do not prove the proxy registered us (a refusal starts with them too); a PING
    // answered after them does: a refused session has sent its GOAWAY before it could answer, and
    // TCP keeps that order.
    current.once('remoteSettings', () => {
      if (current.destroyed) return;
      current.setLocalWindowSize(TUNNEL_WINDOW_BYTES);
      current.ping((err) => {
        if (err || refusal || current.destroyed || current.closed) return;
        this.connected = true;
        this.connections++;
        this.current = { via: viaText, connections: this.connections };
        this.log.info(this.current, 'tunnel up');
        this.emit('connected', this.current);
      });
    });
    startHeartbeat(current, {
      intervalMs: o.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
      timeoutMs: o.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS,
      onTimeout: (why) => {
        reason ??= `heartbeat: ${why}`;
        this.log.warn({ code: ErrorCodes.AGENT_HEARTBEAT_TIMEOUT }, `proxy heartbeat failed: ${why}`);
        current.destroy();
        socket.destroy();
      },
    });
    let sessionClosed = false;
    const closedNow = once(current, 'close').then(() => {
      sessionClosed = true;
    });
    await Promise.race([closedNow, goawaySeen]);
    // `closed` turns true as soon as a GOAWAY arrives (Node begins a graceful close), so whether
    // the session is really over is read from its 'close' event.
    if (sessionClosed || current.destroyed) socket.destroy();
    else {
      const old = { session: current, socket };
      this.draining.add(old);
      current.once('close', () => {
        socket.destroy();
        this.draining.delete(old);
      });
    }
    this.session = undefined;
    this.socket = undefined;
    const wasConnected = this.connected;
    this.connected = false;
    if (wasConnected) {
      const why = reason ?? 'proxy closed the tunnel';
      this.log.info({ reason: why }, 'tunnel down');
      this.emit('disconnected', { reason: why });
    } else if (refusal) {
      throw refusal;
    } else if (!this.stopped) {
      throw new GateError(ErrorCodes.AGENT_STREAM_FAILED, `tunnel closed before the proxy spoke HTTP/2: ${reason ?? 'closed'}`);
    }
  }
}

/**
 * Starts an agent: it dials the proxy (through HTTPS_PROXY unless NO_PROXY or `dialProxy` say
 * otherwise) with TLS, ALPN `gate-reversetunnel` and its client certificate, holds the connection
 * as an HTTP/2 session in which the proxy opens one CONNECT stream per client connection, and
 * reconnects with capped exponential backoff and full jitter whenever it drops. Throws
 * GATE_ERR_AGENT_IDENTITY at once when the certificate does not name `name`.
 */
export function startAgent(options: AgentOptions): TunnelAgent {
  const named = certificateName(options.cert);
  if (named !== options.name) {
    throw new GateError(ErrorCodes.AGENT_IDENTITY, `agent ${JSON.stringify(options.name)} holds a certificate for ${JSON.stringify(named)}`);
  }
  const agent = new Agent(options);
  agent.start();
  return agent;
}
