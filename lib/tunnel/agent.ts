import { EventEmitter, once } from 'node:events';
import { X509Certificate } from 'node:crypto';
import { hostname } from 'node:os';
import { createServer, type Http2Server } from 'node:http2';
import type { AgentTarget } from './agent-stream.js';
import type { ProxyConfig } from '../client/proxy-config.js';
import type { ConnectionUpgradeDial } from '../client/dial-tls.js';
import { ErrorCodes, GateError } from '../errors.js';
import { type Closable, type CloseOptions, Lifecycle, type LifecycleState } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { agentNameOf, commonNameOfSubject } from './agent-identity.js';
import { AgentPool, DEFAULT_CONNECTION_COUNT, RedialSchedule, type DialOutcome } from './agent-pool.js';
import { AgentTunnel, type TunnelProtocolChoice, tunnelProtocolFromEnv } from './agent-tunnel.js';
import { DEFAULT_BACKOFF, type BackoffOptions } from './backoff.js';
import type { ClusterView } from './cluster-view.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS } from './heartbeat.js';
import { TUNNEL_MAX_STREAMS, TUNNEL_SESSION_SETTINGS } from './settings.js';
import { MAX_SERVICES, parseService, upgraderFrom, type AgentDescription, type AgentService } from './agent-description.js';
import { serverIdForName } from './server-id.js';
import type { LastUpdate } from '../upgrade/last-update.js';
import { packageVersion } from '../wire/package-version.js';
import { DEFAULT_UPDATE_GROUP, isValidUpdateGroup } from '../wire/names.js';

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
  /**
   * Through a load balancer that ends TLS, the tunnel's TLS goes inside a WebSocket connection
   * upgrade; detected by default (client/dial-tls.ts). Here only to force it or to trust a
   * balancer's certificate outside the system store.
   */
  connectionUpgrade?: ConnectionUpgradeDial;
  /** Targets (`host:port`) this agent serves. Ignored when `allow` is given. */
  resources?: string[];
  /** Policy for targets the proxy asks for. Default: exactly `resources`; nothing else. */
  allow?: (target: string) => boolean;
  logger?: Logger;
  /** Deadline for dialling the proxy and the TLS handshake (default 10 s). */
  dialTimeoutMs?: number;
  /**
   * The tunnel protocols offered to the proxy: `auto` (default) offers gate-mux's framing, then
   * HTTP/2, and the proxy chooses (one older than the framing chooses HTTP/2); `http2` offers
   * HTTP/2 only, as agents before the framing did.
   */
  tunnelProtocol?: TunnelProtocolChoice;
  /** Deadline for the TCP connect to a target (default 10 s). */
  targetDialTimeoutMs?: number;
  /**
   * Streams the proxy may hold open at once on one tunnel (default 1000, TUNNEL_MAX_STREAMS): an
   * open past it is refused and counted against the proxy's rapid-reset budget. The proxy keeps
   * below it by its own count (its `agentMaxStreams`, to be set alike), so set both or neither.
   */
  maxStreams?: number;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /** Reconnect backoff (default 0.5 s growing to 30 s, full jitter). */
  backoff?: BackoffOptions;
  /** A session that stayed up this long resets the backoff (default 10 s). */
  stableAfterMs?: number;
  /** Source of jitter, [0, 1) (default Math.random). */
  random?: () => number;
  /**
   * Tunnels to keep, each to a distinct proxy of a cluster (default 2). Proxies say which one a
   * tunnel landed on and which proxies exist; with fewer proxies the agent holds one per proxy,
   * and with a proxy that says nothing (on its own, or older) it holds one tunnel.
   */
  connectionCount?: number;
  /** The services it provides, for the inventory (the tunnel's policy is `resources` / `allow`). */
  services?: Array<{ kind: string; name: string }>;
  /** Default: the machine's host name. */
  hostname?: string;
  /** The version it reports, which the proxy checks against its own (default: this package's). */
  version?: string;
  /** The rollout group it reports (`updater.group` of agent.yaml; default `default`). */
  updateGroup?: string;
}

export interface AgentConnectedEvent {
  /** The environment proxy the tunnel went through, redacted, or `direct`. */
  via: string;
  /** How many times a tunnel has come up, this one included. */
  connections: number;
  /** The proxy this tunnel landed on, when the proxy said (a proxy of a cluster does). */
  proxyId?: string;
  /** The protocol the proxy chose: `framed` (gate-mux's framing) or `http2` (an older proxy, or `tunnelProtocol: 'http2'`). */
  protocol: 'framed' | 'http2';
}

/** One tunnel the agent holds. */
export interface AgentTunnelInfo {
  /** The proxy it landed on, when the proxy said. */
  proxyId?: string;
  via: string;
  /** Epoch milliseconds its dial began. */
  since: number;
  /** The protocol the proxy chose. */
  protocol: 'framed' | 'http2';
}

/**
 * A running agent: up to `connectionCount` tunnels, each to a distinct proxy. Events, per tunnel:
 * `connected` (AgentConnectedEvent) once the proxy has registered it (its SETTINGS and the answer
 * to a first PING arrived); `disconnected` ({reason, proxyId?}) when it stops taking streams;
 * `refused` (GateError) when a proxy refuses a tunnel, with the proxy's code
 * (GATE_ERR_AGENT_CERT_EXPIRED, _REVOKED, _UNTRUSTED, GATE_ERR_AGENT_DUPLICATE, ...; a duplicate
 * while the agent holds tunnels is a dial that landed on a proxy it holds, and is simply retried).
 */
export interface TunnelAgent extends EventEmitter, Closable {
  readonly name: string;
  /** True while at least one tunnel is up. */
  readonly connected: boolean;
  /** Times a tunnel has come up so far. */
  readonly connections: number;
  /** Tunnels it keeps when the proxies allow (the `connectionCount` option). */
  readonly connectionCount: number;
  /** The tunnels up now. */
  readonly tunnels: AgentTunnelInfo[];
  /** The proxies of the cluster from the latest list a proxy sent (sorted), or undefined before any. */
  readonly proxies: string[] | undefined;
  /**
   * Tunnels dialled so far, and how many of them landed on a proxy the agent already held (refused
   * there with GATE_ERR_AGENT_DUPLICATE, or closed by the agent when the proxy named itself).
   */
  readonly dials: number;
  readonly duplicates: number;
  /** Target connections open right now. */
  readonly openStreams: number;
  /** Streams the proxy has opened in this agent's tunnels so far. */
  readonly streamsServed: number;
  /** Resolves once the tunnel is up (at once if it is); rejects after `timeoutMs`. */
  waitConnected(timeoutMs?: number): Promise<AgentConnectedEvent>;
  /** open, closing (close() called), closed (everything released). */
  readonly state: LifecycleState;
  /**
   * Stops reconnecting and destroys the session, its streams and their target sockets. With
   * `graceMs`, first closes the tunnel cleanly: GOAWAY (NO_ERROR) so the proxy stops opening
   * streams and frees the name at once, then up to `graceMs` for open streams to finish. A second
   * call returns the same promise.
   */
  close(options?: CloseOptions): Promise<void>;
  /** Stops now: every tunnel and target socket destroyed (streams reset with `err`, default GATE_ERR_SHUTDOWN). */
  destroy(err?: GateError): void;
  /** @deprecated Use `close(options)`: the same call under its old name, kept for one release. */
  stop(options?: CloseOptions): Promise<void>;
  /** Use this certificate and key from the next tunnel connection on (after a renewal). */
  setIdentity(identity: { cert: string | Buffer; key: string | Buffer }): void;
  /** What it tells the proxies about itself (the inventory's row). */
  readonly description: AgentDescription;
  /** Changes the services it reports; the proxies it holds tunnels to are told at once. */
  setServices(services: Array<{ kind: string; name: string }>): void;
  /** Sets (or clears) what its updater's latest install came to, and describes itself again. */
  setLastUpdate(update: LastUpdate | undefined): void;
}

/** The services as the proxy is told them: GATE_ERR_INVALID_ARGUMENT for a kind or name it would refuse. */
function servicesOf(services: ReadonlyArray<{ kind: string; name: string }>): AgentService[] {
  if (services.length > MAX_SERVICES)
    throw new GateError(
      ErrorCodes.INVALID_ARGUMENT,
      `at most ${MAX_SERVICES} services, not ${services.length}: the proxy would refuse the description`,
    );
  return services.map((s) => parseService(`${s.kind}:${s.name}`));
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
  connections = 0;
  streamsServed = 0;
  dials = 0;
  duplicates = 0;
  private readonly log: Logger;
  private readonly allow: (target: string) => boolean;
  private readonly targets = new Set<AgentTarget>();
  private readonly h2: Http2Server;
  private readonly pool: AgentPool;
  private readonly schedule: RedialSchedule;
  private readonly lifecycle = new Lifecycle();
  private readonly abort = new AbortController();
  private wake: (() => void) | undefined;
  /** Set when something changed while the loop was not waiting (a tunnel ended, a list came). */
  private changed = false;
  private wakeOnChange = false;
  private nextDelayMs = 0;
  private loop: Promise<void> | undefined;
  private current: AgentConnectedEvent | undefined;
  private identity: { cert: string | Buffer; key: string | Buffer };
  private described: AgentDescription;
  /** Tunnels that take new streams, or are being dialled: what the pool counts. */
  private readonly active = new Set<AgentTunnel>();
  /** Every tunnel not finished yet, those finishing their streams after a GOAWAY included, for close(). */
  private readonly all = new Set<AgentTunnel>();

  constructor(private readonly options: AgentOptions) {
    super();
    this.name = options.name;
    this.log = componentLogger(options.logger, 'tunnel-agent').child({ agent: options.name });
    this.allow = options.allow ?? defaultPolicy(options.resources ?? []);
    this.identity = { cert: options.cert, key: options.key };
    this.pool = new AgentPool(options.connectionCount ?? DEFAULT_CONNECTION_COUNT);
    this.schedule = new RedialSchedule(options.backoff ?? DEFAULT_BACKOFF, options.stableAfterMs ?? 10_000, options.random);
    // The agent is the HTTP/2 *server* on a connection it dialled: the proxy is the one that opens
    // streams (one per client connection), so it must be the client (RFC 9113 §5.1.1: clients open
    // odd-numbered streams). The server object only builds sessions; it never listens.
    this.h2 = createServer({
      settings: { ...TUNNEL_SESSION_SETTINGS, maxConcurrentStreams: options.maxStreams ?? TUNNEL_MAX_STREAMS },
    });
    this.described = {
      // Bound to the certificate's name (server-id.ts): the proxy refuses any other (issue 37).
      serverId: serverIdForName(options.name),
      hostname: options.hostname ?? hostname(),
      services: servicesOf(options.services ?? []),
      version: options.version ?? packageVersion,
      upgrader: upgraderFrom(options.env ?? process.env),
      updateGroup: options.updateGroup ?? DEFAULT_UPDATE_GROUP,
    };
  }

  get description(): AgentDescription {
    return { ...this.described, services: this.described.services.map((s) => ({ ...s })) };
  }

  setServices(services: Array<{ kind: string; name: string }>): void {
    this.described = { ...this.described, services: servicesOf(services) };
    for (const tunnel of this.active) tunnel.describeAgain();
  }

  setLastUpdate(update: LastUpdate | undefined): void {
    const { lastUpdate: _, ...rest } = this.described;
    this.described = update ? { ...rest, lastUpdate: { ...update } } : rest;
    for (const tunnel of this.active) tunnel.describeAgain();
  }

  get openStreams(): number {
    return this.targets.size;
  }

  get connected(): boolean {
    return [...this.active].some((t) => t.up);
  }

  get connectionCount(): number {
    return this.pool.connectionCount;
  }

  get proxies(): string[] | undefined {
    return this.pool.proxies;
  }

  get tunnels(): AgentTunnelInfo[] {
    return [...this.active]
      .filter((t) => t.up)
      .map((t) => ({
        via: t.via,
        since: t.startedAt,
        protocol: t.protocol ?? 'http2',
        ...(t.proxyId === undefined ? {} : { proxyId: t.proxyId }),
      }));
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
    if (named !== this.name)
      throw new GateError(
        ErrorCodes.AGENT_IDENTITY,
        `agent ${JSON.stringify(this.name)} was given a certificate for ${JSON.stringify(named)}`,
      );
    this.identity = { cert: identity.cert, key: identity.key };
  }

  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  close(options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      const why = new GateError(ErrorCodes.SHUTDOWN, 'agent stopping');
      this.stopLoop(why);
      if (options.graceMs !== undefined) {
        // Each tunnel's close sends GOAWAY NO_ERROR and waits for its open streams; the grace bounds the wait.
        await Promise.all([...this.active].map((t) => t.close({ graceMs: options.graceMs, reason: why.message })));
      }
      this.release(why);
      await this.loop;
    });
  }

  destroy(err: GateError = new GateError(ErrorCodes.SHUTDOWN, 'agent stopping')): void {
    if (!this.lifecycle.destroy()) return;
    this.stopLoop(err);
    this.release(err);
  }

  /** @deprecated Use close(options); stop() is close() under its old name, kept for one release. */
  stop(options: CloseOptions = {}): Promise<void> {
    return this.close(options);
  }

  /** Stops dialling: the loop sees `stopped`, a dial in progress is aborted, a backoff wait ends. */
  private stopLoop(why: GateError): void {
    this.abort.abort(why);
    this.wake?.();
  }

  private release(why: GateError): void {
    for (const tunnel of this.all) tunnel.destroy(why);
    for (const target of this.targets) target.destroy();
  }

  /** Whether close() or destroy() was called: no more dials, no more events. */
  private get stopped(): boolean {
    return this.lifecycle.ending;
  }

  /** Tells the loop that something it decides on changed (it is not woken from a backoff wait). */
  private poke(): void {
    this.changed = true;
    if (this.wakeOnChange) this.wake?.();
  }

  /** Waits until poked (or stopped), or for `ms` when given (only close() or destroy() cuts that short). */
  private async pause(ms?: number): Promise<void> {
    if (ms === undefined && this.changed) {
      this.changed = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
      this.wakeOnChange = ms === undefined;
    });
    this.wake = undefined;
    this.wakeOnChange = false;
    if (ms === undefined) this.changed = false;
  }

  /**
   * The pool: while fewer tunnels are up (or coming up) than wanted, dial one more, one at a time,
   * with a jittered wait before each dial after the first; otherwise wait until a tunnel ends or a
   * proxy sends a new list. Dialling one at a time means every new tunnel is compared with tunnels
   * whose proxy is already known.
   */
  private async run(): Promise<void> {
    while (!this.stopped) {
      if (!this.pool.short(this.active)) {
        await this.pause();
        continue;
      }
      if (this.nextDelayMs > 0) {
        const delay = this.nextDelayMs;
        this.nextDelayMs = 0;
        this.log.info({ delayMs: delay }, 'reconnecting after backoff');
        await this.pause(delay);
        continue; // things may have changed meanwhile
      }
      const outcome = await this.dialOne();
      if (this.stopped) break;
      this.nextDelayMs = Math.max(this.nextDelayMs, this.schedule.afterDial(outcome));
    }
  }

  /** Dials one tunnel and resolves once it is known whether it adds a proxy, duplicates one, or failed. */
  private dialOne(): Promise<DialOutcome> {
    this.dials++;
    const tunnel = new AgentTunnel({
      proxy: this.options.proxy,
      ca: this.options.ca,
      cert: this.identity.cert,
      key: this.identity.key,
      serverName: this.options.serverName,
      env: this.options.env,
      dialProxy: this.options.dialProxy,
      connectionUpgrade: this.options.connectionUpgrade,
      dialTimeoutMs: this.options.dialTimeoutMs,
      targetDialTimeoutMs: this.options.targetDialTimeoutMs ?? 10_000,
      maxStreams: this.options.maxStreams ?? TUNNEL_MAX_STREAMS,
      heartbeatIntervalMs: this.options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
      heartbeatTimeoutMs: this.options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS,
      logger: this.options.logger,
      log: this.log,
      h2: this.h2,
      protocol: this.options.tunnelProtocol ?? tunnelProtocolFromEnv(this.options.env ?? process.env),
      allow: this.allow,
      signal: this.abort.signal,
      track: (target) => {
        this.targets.add(target);
        return () => this.targets.delete(target);
      },
      served: () => this.streamsServed++,
      description: () => this.described,
    });
    this.active.add(tunnel);
    this.all.add(tunnel);
    void tunnel.finished.then(() => this.all.delete(tunnel));
    let added = false;
    return new Promise<DialOutcome>((resolve) => {
      tunnel.on('view', (view: ClusterView) => {
        const forgotten = this.pool.learn(view);
        if (forgotten.length > 0) this.log.info({ forgotten, proxies: this.pool.proxies }, 'proxies no longer in the cluster forgotten');
        // A view that comes after the tunnel was counted (late, or a changed list) may reveal a duplicate.
        if (added && tunnel.up && this.pool.duplicateOf(tunnel, this.upTunnels()) !== undefined) this.dropDuplicate(tunnel);
        this.poke();
      });
      tunnel.on('refused', (error: GateError) => {
        // The proxy holds one tunnel per agent name: while this agent holds tunnels, a duplicate
        // refusal means this dial landed on one of its own proxies, which is no failure.
        if (error.code === ErrorCodes.AGENT_DUPLICATE && this.connected)
          this.log.debug({ code: error.code }, 'landed on a proxy this agent already holds');
        else if (error.code === ErrorCodes.DRAINING) this.log.info({ code: error.code }, 'landed on a draining proxy: dialling again');
        else this.log.warn({ code: error.code }, error.message);
        this.emit('refused', error);
      });
      const admit = (): void => {
        added = true;
        this.connections++;
        this.current = {
          via: tunnel.via,
          connections: this.connections,
          protocol: tunnel.protocol ?? 'http2',
          ...(tunnel.proxyId === undefined ? {} : { proxyId: tunnel.proxyId }),
        };
        this.log.info(this.current, 'tunnel up');
        this.emit('connected', this.current);
        resolve('added');
      };
      tunnel.once('up', () => {
        if (this.stopped) return;
        const held = this.pool.duplicateOf(tunnel, this.upTunnels());
        if (!held) return admit();
        // Two tunnels on one proxy. A proxy admits a second tunnel under a name only once it holds
        // the first one gone (a heartbeat or probe found its path dead, RFC 9113 §6.7 PINGs), so
        // the held one may be a dead path this agent has not noticed yet: it proves itself with a
        // PING. Alive, the new tunnel is the duplicate and is closed; silent, the held one is
        // dropped and the new one, which the proxy has registered, is kept.
        void held.probe(this.options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS).then((alive) => {
          if (this.stopped) return resolve('failed');
          if (alive || !tunnel.up) {
            this.dropDuplicate(tunnel);
            return resolve('duplicate');
          }
          this.log.warn(
            { proxyId: held.proxyId, code: ErrorCodes.AGENT_HEARTBEAT_TIMEOUT },
            'a new tunnel came up on a proxy whose held tunnel no longer answers: the held one is dropped',
          );
          held.destroy(
            new GateError(ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, 'heartbeat: no PING answer after a newer tunnel to the same proxy came up'),
          );
          admit();
        });
      });
      tunnel.run().then(
        () => {
          this.tunnelEnded(tunnel, added);
          resolve(added ? 'added' : 'failed'); // settled already unless the agent stopped meanwhile
        },
        (err: GateError) => {
          this.active.delete(tunnel);
          if (!this.stopped && !added && err.code !== ErrorCodes.SHUTDOWN && err !== tunnel.refusal) {
            this.log.warn({ err, code: err.code, attempt: this.dials }, 'tunnel connection failed');
          }
          if (err.code === ErrorCodes.AGENT_DUPLICATE) this.duplicates++;
          // A draining proxy (its SIGTERM, a rolling restart) is leaving the load balancer: like a
          // duplicate, the dial is retried soon, elsewhere, without growing the failure backoff.
          const elsewhere = err.code === ErrorCodes.AGENT_DUPLICATE || err.code === ErrorCodes.DRAINING;
          resolve(elsewhere ? 'duplicate' : 'failed');
          this.poke();
        },
      );
    });
  }

  private upTunnels(): AgentTunnel[] {
    return [...this.active].filter((t) => t.up);
  }

  /** A tunnel that landed on a proxy another tunnel holds: closed at once with GOAWAY, streams (none yet) given 5 s. */
  private dropDuplicate(tunnel: AgentTunnel): void {
    this.duplicates++;
    this.active.delete(tunnel);
    this.log.info({ proxyId: tunnel.proxyId }, 'a new tunnel landed on a proxy this agent already holds: closed');
    void tunnel.close({ graceMs: 5_000, reason: `duplicate: this agent already holds a tunnel to proxy ${tunnel.proxyId}` });
    this.poke();
  }

  /** A tunnel stopped taking streams (closed, or GOAWAY with streams finishing on it). */
  private tunnelEnded(tunnel: AgentTunnel, added: boolean): void {
    const wasActive = this.active.delete(tunnel);
    if (this.stopped) return;
    if (added) {
      const why = tunnel.reason ?? 'proxy closed the tunnel';
      this.log.info({ reason: why, proxyId: tunnel.proxyId }, 'tunnel down');
      this.emit('disconnected', { reason: why, ...(tunnel.proxyId === undefined ? {} : { proxyId: tunnel.proxyId }) });
    }
    // A duplicate this agent closed was already accounted for (dropDuplicate).
    if (wasActive) this.nextDelayMs = Math.max(this.nextDelayMs, this.schedule.afterTunnelEnd(Date.now() - tunnel.startedAt));
    this.poke();
  }
}

/**
 * Starts an agent: it dials the proxy (through HTTPS_PROXY unless NO_PROXY or `dialProxy` say
 * otherwise) with TLS, ALPN `gate-reversetunnel` and its client certificate, holds the connection
 * as an HTTP/2 session in which the proxy opens one CONNECT stream per client connection, and
 * reconnects with capped exponential backoff and full jitter whenever it drops. Behind a load
 * balancer in front of several proxies it keeps up to `connectionCount` such tunnels, each to a
 * distinct proxy (agent-pool.ts). Throws
 * GATE_ERR_AGENT_IDENTITY at once when the certificate does not name `name`.
 */
export function startAgent(options: AgentOptions): TunnelAgent {
  const named = certificateName(options.cert);
  if (named !== options.name) {
    throw new GateError(
      ErrorCodes.AGENT_IDENTITY,
      `agent ${JSON.stringify(options.name)} holds a certificate for ${JSON.stringify(named)}`,
    );
  }
  if (options.maxStreams !== undefined && (!Number.isInteger(options.maxStreams) || options.maxStreams < 1)) {
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `maxStreams must be a whole number of at least 1, not ${String(options.maxStreams)}`);
  }
  if (options.updateGroup !== undefined && !isValidUpdateGroup(options.updateGroup)) {
    throw new GateError(
      ErrorCodes.INVALID_ARGUMENT,
      `update group ${JSON.stringify(options.updateGroup)}: letters, digits, ".", "_", "-", at most 64`,
    );
  }
  const agent = new Agent(options);
  agent.start();
  return agent;
}
