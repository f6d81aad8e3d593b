import { EventEmitter, once } from 'node:events';
import { X509Certificate } from 'node:crypto';
import { hostname } from 'node:os';
import type { AgentTarget } from './agent-stream.js';
import { ErrorCodes, GateError } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { agentNameOf, commonNameOfSubject } from './agent-identity.js';
import { AgentPool, DEFAULT_CONNECTION_COUNT, RedialSchedule, type DialOutcome } from './agent-pool.js';
import { AgentTunnel, type AgentTunnelSettings } from './agent-tunnel.js';
import { DEFAULT_BACKOFF } from './backoff.js';
import type { ClusterView } from './cluster-view.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS } from './heartbeat.js';
import { TUNNEL_MAX_STREAMS } from './settings.js';
import { MAX_SERVICES, parseService, upgraderFrom, type AgentDescription, type AgentService } from './agent-description.js';
import { serverIdForName } from './server-id.js';
import type { LastUpdate } from '../updater/last-update.js';
import { packageVersion } from '../wire/package-version.js';
import { DEFAULT_UPDATE_GROUP, isValidUpdateGroup } from '../wire/names.js';

export type { AgentOptions, AgentConnectedEvent, AgentTunnelInfo, TunnelAgent } from './agent-api.js';
import type { AgentOptions, AgentConnectedEvent, AgentTunnelInfo, TunnelAgent } from './agent-api.js';

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
  /** What every tunnel is dialled with, but the identity (which a renewal replaces). */
  private readonly tunnelSettings: Omit<AgentTunnelSettings, 'cert' | 'key'>;

  constructor(private readonly options: AgentOptions) {
    super();
    this.name = options.name;
    this.log = componentLogger(options.logger, 'tunnel-agent').child({ agent: options.name });
    this.allow = options.allow ?? defaultPolicy(options.resources ?? []);
    this.identity = { cert: options.cert, key: options.key };
    this.pool = new AgentPool(options.connectionCount ?? DEFAULT_CONNECTION_COUNT);
    this.schedule = new RedialSchedule(options.backoff ?? DEFAULT_BACKOFF, options.stableAfterMs ?? 10_000, options.random);
    this.tunnelSettings = {
      proxy: options.proxy,
      ca: options.ca,
      serverName: options.serverName,
      env: options.env,
      dialProxy: options.dialProxy,
      connectionUpgrade: options.connectionUpgrade,
      dialTimeoutMs: options.dialTimeoutMs,
      targetDialTimeoutMs: options.targetDialTimeoutMs ?? 10_000,
      maxStreams: options.maxStreams ?? TUNNEL_MAX_STREAMS,
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS,
      logger: options.logger,
      log: this.log,
      allow: this.allow,
      signal: this.abort.signal,
      track: (target) => {
        this.targets.add(target);
        return () => this.targets.delete(target);
      },
      served: () => this.streamsServed++,
      description: () => this.described,
    };
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
    const tunnel = new AgentTunnel({ ...this.tunnelSettings, ...this.identity });
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
        // the first one gone (a heartbeat or probe found its path dead with PINGs), so
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
 * otherwise) with TLS, ALPN `gate-reversetunnel-framed` and its client certificate, holds the
 * connection as a session of gate-mux's tunnel framing in which the proxy opens one stream per
 * client connection, and
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
