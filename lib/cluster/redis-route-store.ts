import { once } from 'node:events';
import { Redis } from 'ioredis';
import { ErrorCodes, GateError } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState, within, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import type { InventoryRecord, ProxyPresence, RouteStore, TunnelHolding } from './route-store.js';
import { parseInventoryRecord } from './inventory.js';
import { parseStoredResource, type PutMode, type ResourceStore, type ResourceWrite, type StoredResource } from './resource-store.js';

export interface RedisRouteStoreOptions {
  host: string;
  port: number;
  /** `rediss://`: TLS, verified against `ca` (PEM) or the system CAs, for the name `host`. */
  tls?: boolean;
  ca?: string | Buffer;
  username?: string;
  password?: string;
  db?: number;
  /** Every key starts with this (default `gate:`): several clusters, or test files, share one Redis. */
  keyPrefix?: string;
  /** Milliseconds a command may take before it fails with GATE_ERR_STORE_UNAVAILABLE (default 2000). */
  commandTimeoutMs?: number;
  /** How the server is named in messages (never with its password). */
  label?: string;
  logger?: Logger;
}

const DEFAULT_COMMAND_TIMEOUT_MS = 2000;
/** Reconnect attempts back off to this: a Redis that is back is seen within it. */
const MAX_RECONNECT_DELAY_MS = 1000;

// The record layout (docs/ARCHITECTURE.md, "The route store in Redis"), under the prefix P:
//   P proxy:<id>            string, JSON ProxyPresence, PX ttl           (the presence)
//   P proxies               set of proxy ids, pruned when their key is gone
//   P tunnel:<agent>:<id>   string, the generation, PX ttl               (one holding)
//   P holders:<agent>       set of proxy ids holding <agent>, PX >= the longest holding
//   P agent:<sid>:<id>      string, JSON InventoryRecord, PX ttl         (an agent as proxy <id> holds it)
//   P agents                set of <sid>:<id>, pruned when their key is gone
//   P resource:<kind>:<name> hash: revision, record (JSON: document, updatedBy, updatedAt)
//   P resources:<kind>      set of names
//   P revision              the resources' revision counter (INCR)
//   P lease:<name>          string, the holder, PX ttl                   (one proxy at a time: the rollout controller)
// Every operation that reads or writes more than one key is one Lua script: atomic (Redis runs a
// script alone), one round trip, and so the generation checks cannot race. Scripts build their key
// names from the prefix, so the store needs a standalone Redis (or a primary behind Sentinel), not
// Redis Cluster.

/** ARGV: prefix, id, presence JSON, ttl. */
const ANNOUNCE = `
redis.call('SET', ARGV[1] .. 'proxy:' .. ARGV[2], ARGV[3], 'PX', ARGV[4])
redis.call('SADD', ARGV[1] .. 'proxies', ARGV[2])
return 1`;

/** ARGV: prefix, id. */
const WITHDRAW = `
redis.call('DEL', ARGV[1] .. 'proxy:' .. ARGV[2])
redis.call('SREM', ARGV[1] .. 'proxies', ARGV[2])
return 1`;

/** ARGV: prefix. Returns the live presences' JSON; ids whose key expired leave the set. */
const PROXIES = `
local ids = redis.call('SMEMBERS', ARGV[1] .. 'proxies')
local out = {}
for _, id in ipairs(ids) do
  local value = redis.call('GET', ARGV[1] .. 'proxy:' .. id)
  if value then table.insert(out, value) else redis.call('SREM', ARGV[1] .. 'proxies', id) end
end
return out`;

/**
 * ARGV: prefix, agent, id, generation, ttl. An older generation never overwrites a newer one (a
 * refresh racing a reconnect); the same one refreshes its TTL. Returns 1 when written.
 */
const HOLD = `
local key = ARGV[1] .. 'tunnel:' .. ARGV[2] .. ':' .. ARGV[3]
local held = redis.call('GET', key)
if held and tonumber(held) > tonumber(ARGV[4]) then return 0 end
redis.call('SET', key, ARGV[4], 'PX', ARGV[5])
local set = ARGV[1] .. 'holders:' .. ARGV[2]
redis.call('SADD', set, ARGV[3])
if redis.call('PTTL', set) < tonumber(ARGV[5]) then redis.call('PEXPIRE', set, ARGV[5]) end
return 1`;

/** ARGV: prefix, agent, id, generation. Compare-and-delete: only that generation is removed. */
const DROP = `
local key = ARGV[1] .. 'tunnel:' .. ARGV[2] .. ':' .. ARGV[3]
if redis.call('GET', key) ~= ARGV[4] then return 0 end
redis.call('DEL', key)
redis.call('SREM', ARGV[1] .. 'holders:' .. ARGV[2], ARGV[3])
return 1`;

/**
 * ARGV: prefix, agent. Returns {id, generation, ...} of the holdings whose record and whose proxy's
 * presence are both live: a proxy whose presence expired is no candidate, whatever its tunnel
 * record says. Expired holdings leave the set.
 */
const HOLDERS = `
local set = ARGV[1] .. 'holders:' .. ARGV[2]
local ids = redis.call('SMEMBERS', set)
local out = {}
for _, id in ipairs(ids) do
  local generation = redis.call('GET', ARGV[1] .. 'tunnel:' .. ARGV[2] .. ':' .. id)
  if not generation then
    redis.call('SREM', set, id)
  elseif redis.call('EXISTS', ARGV[1] .. 'proxy:' .. id) == 1 then
    table.insert(out, id)
    table.insert(out, generation)
  end
end
return out`;

/**
 * ARGV: prefix, server id, proxy id, generation, record JSON, ttl. As HOLD: an older generation
 * never overwrites a newer one. Returns 1 when written.
 */
const PUT_AGENT = `
local member = ARGV[2] .. ':' .. ARGV[3]
local key = ARGV[1] .. 'agent:' .. member
local held = redis.call('GET', key)
if held then
  local ok, record = pcall(cjson.decode, held)
  if ok and type(record) == 'table' and tonumber(record.generation) and tonumber(record.generation) > tonumber(ARGV[4]) then return 0 end
end
redis.call('SET', key, ARGV[5], 'PX', ARGV[6])
redis.call('SADD', ARGV[1] .. 'agents', member)
return 1`;

/** ARGV: prefix, server id, proxy id, generation. Compare-and-delete, as DROP. */
const DROP_AGENT = `
local member = ARGV[2] .. ':' .. ARGV[3]
local key = ARGV[1] .. 'agent:' .. member
local held = redis.call('GET', key)
if not held then return 0 end
local ok, record = pcall(cjson.decode, held)
if not ok or type(record) ~= 'table' or tonumber(record.generation) ~= tonumber(ARGV[4]) then return 0 end
redis.call('DEL', key)
redis.call('SREM', ARGV[1] .. 'agents', member)
return 1`;

/**
 * ARGV: prefix. The records whose key and whose proxy's presence are live; members whose key
 * expired leave the set. A member is <server id>:<proxy id>; a server id is a UUID (no colon).
 */
const AGENTS = `
local set = ARGV[1] .. 'agents'
local out = {}
for _, member in ipairs(redis.call('SMEMBERS', set)) do
  local value = redis.call('GET', ARGV[1] .. 'agent:' .. member)
  local proxy = string.match(member, '^[^:]+:(.+)$')
  if not value then
    redis.call('SREM', set, member)
  elseif proxy and redis.call('EXISTS', ARGV[1] .. 'proxy:' .. proxy) == 1 then
    table.insert(out, value)
  end
end
return out`;

/**
 * ARGV: prefix, kind, name, mode (create|replace|update), record JSON. Returns the new revision, or
 * 0 when `create` finds one already there or `update` finds none (the check and the write are one
 * step: of two racing creates one wins, and an update racing a removal does not undo it).
 */
const PUT_RESOURCE = `
local key = ARGV[1] .. 'resource:' .. ARGV[2] .. ':' .. ARGV[3]
local exists = redis.call('EXISTS', key) == 1
if (ARGV[4] == 'create' and exists) or (ARGV[4] == 'update' and not exists) then return 0 end
if ARGV[4] == 'revision' and tonumber(redis.call('HGET', key, 'revision') or '0') ~= tonumber(ARGV[6]) then return 0 end
local revision = redis.call('INCR', ARGV[1] .. 'revision')
redis.call('HSET', key, 'revision', revision, 'record', ARGV[5])
redis.call('SADD', ARGV[1] .. 'resources:' .. ARGV[2], ARGV[3])
return revision`;

/**
 * ARGV: prefix, name, holder, ttl. SET NX PX, or a renewal when the holder already holds it (GET
 * and PEXPIRE in one script: a lease that expired between the two cannot be renewed by mistake).
 */
const HOLD_LEASE = `
local key = ARGV[1] .. 'lease:' .. ARGV[2]
if redis.call('SET', key, ARGV[3], 'NX', 'PX', ARGV[4]) then return 1 end
if redis.call('GET', key) == ARGV[3] then redis.call('PEXPIRE', key, ARGV[4]) return 1 end
return 0`;

/** ARGV: prefix, name, holder. Compare-and-delete. */
const RELEASE_LEASE = `
local key = ARGV[1] .. 'lease:' .. ARGV[2]
if redis.call('GET', key) == ARGV[3] then redis.call('DEL', key) end
return 1`;

/** ARGV: prefix, kind, name. Returns {revision, record} of what was removed, or an empty list. */
const DELETE_RESOURCE = `
local key = ARGV[1] .. 'resource:' .. ARGV[2] .. ':' .. ARGV[3]
local held = redis.call('HMGET', key, 'revision', 'record')
redis.call('SREM', ARGV[1] .. 'resources:' .. ARGV[2], ARGV[3])
if not held[1] then return {} end
redis.call('DEL', key)
redis.call('INCR', ARGV[1] .. 'revision')
return held`;

/** ARGV: prefix, kind. Returns {name, revision, record, ...}; names whose hash is gone leave the set. */
const LIST_RESOURCES = `
local set = ARGV[1] .. 'resources:' .. ARGV[2]
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', set)) do
  local held = redis.call('HMGET', ARGV[1] .. 'resource:' .. ARGV[2] .. ':' .. name, 'revision', 'record')
  if held[1] then
    table.insert(out, name)
    table.insert(out, held[1])
    table.insert(out, held[2])
  else
    redis.call('SREM', set, name)
  end
end
return out`;

interface Scripts {
  gatePutResource(prefix: string, kind: string, name: string, mode: string, record: string, revision: number): Promise<number>;
  gateHoldLease(prefix: string, name: string, holder: string, ttl: number): Promise<number>;
  gateReleaseLease(prefix: string, name: string, holder: string): Promise<number>;
  gateDeleteResource(prefix: string, kind: string, name: string): Promise<Array<string | null>>;
  gateListResources(prefix: string, kind: string): Promise<string[]>;
  gateAnnounce(prefix: string, id: string, presence: string, ttl: number): Promise<unknown>;
  gateWithdraw(prefix: string, id: string): Promise<unknown>;
  gateProxies(prefix: string): Promise<string[]>;
  gateHold(prefix: string, agent: string, id: string, generation: number, ttl: number): Promise<number>;
  gateDrop(prefix: string, agent: string, id: string, generation: number): Promise<number>;
  gateHolders(prefix: string, agent: string): Promise<string[]>;
  gatePutAgent(prefix: string, serverId: string, proxyId: string, generation: number, record: string, ttl: number): Promise<number>;
  gateDropAgent(prefix: string, serverId: string, proxyId: string, generation: number): Promise<number>;
  gateAgents(prefix: string): Promise<string[]>;
}

/**
 * The route store several proxy processes share (`cluster.store: redis://…`), on ioredis.
 *
 * It fails fast rather than queue: with Redis down every call rejects at once (no offline queue)
 * or within the command timeout, with GATE_ERR_STORE_UNAVAILABLE, so nothing on a connection's path
 * waits on a dead store. The client reconnects by itself in the background; the ClusterMember's
 * next refresh then re-registers what its proxy holds.
 */
export class RedisRouteStore implements RouteStore, ResourceStore, Closable {
  private readonly redis: Redis & Scripts;
  private readonly prefix: string;
  private readonly label: string;
  private readonly log: Logger;
  private down = false;
  private readonly lifecycle = new Lifecycle();
  /** Why the connection failed last (WRONGPASS, ECONNREFUSED…), for the messages of refused commands. */
  private lastError: string | undefined;

  constructor(options: RedisRouteStoreOptions) {
    this.prefix = options.keyPrefix ?? 'gate:';
    this.label = options.label ?? `${options.tls ? 'rediss' : 'redis'}://${options.host}:${options.port}/${options.db ?? 0}`;
    this.log = componentLogger(options.logger, 'route-store');
    const commandTimeout = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    this.redis = new Redis({
      host: options.host,
      port: options.port,
      db: options.db ?? 0,
      ...(options.username !== undefined ? { username: options.username } : {}),
      ...(options.password !== undefined ? { password: options.password } : {}),
      ...(options.tls ? { tls: { servername: options.host, ...(options.ca !== undefined ? { ca: options.ca } : {}) } } : {}),
      // Fail fast: a command while disconnected is refused at once instead of
      // queued, one that gets no answer fails after the timeout, and none is retried behind the caller.
      enableOfflineQueue: false,
      commandTimeout,
      connectTimeout: commandTimeout,
      maxRetriesPerRequest: 0,
      retryStrategy: (attempt: number) => Math.min(50 * 2 ** Math.min(attempt, 10), MAX_RECONNECT_DELAY_MS),
      // The scripts hold the redis.call()s; ioredis loads each once (EVALSHA, EVAL on NOSCRIPT).
      scripts: {
        gateAnnounce: { lua: ANNOUNCE, numberOfKeys: 0 },
        gateWithdraw: { lua: WITHDRAW, numberOfKeys: 0 },
        gateProxies: { lua: PROXIES, numberOfKeys: 0 },
        gateHold: { lua: HOLD, numberOfKeys: 0 },
        gateDrop: { lua: DROP, numberOfKeys: 0 },
        gateHolders: { lua: HOLDERS, numberOfKeys: 0 },
        gatePutAgent: { lua: PUT_AGENT, numberOfKeys: 0 },
        gateDropAgent: { lua: DROP_AGENT, numberOfKeys: 0 },
        gateAgents: { lua: AGENTS, numberOfKeys: 0 },
        gatePutResource: { lua: PUT_RESOURCE, numberOfKeys: 0 },
        gateDeleteResource: { lua: DELETE_RESOURCE, numberOfKeys: 0 },
        gateListResources: { lua: LIST_RESOURCES, numberOfKeys: 0 },
        gateHoldLease: { lua: HOLD_LEASE, numberOfKeys: 0 },
        gateReleaseLease: { lua: RELEASE_LEASE, numberOfKeys: 0 },
      },
    }) as Redis & Scripts;
    // Without a listener ioredis prints every connection error to the console. One log line per
    // outage: the ClusterMember reports the failed operations themselves.
    this.redis.on('error', (err: Error) => {
      this.lastError = err.message;
      if (this.down || this.closed) return;
      this.down = true;
      this.log.warn(
        { code: ErrorCodes.STORE_UNAVAILABLE, store: this.label, reason: err.message },
        `route store ${this.label} unreachable: ${err.message}`,
      );
    });
    this.redis.on('ready', () => {
      if (this.down) this.log.info({ store: this.label }, `route store ${this.label} reachable again`);
      this.down = false;
      this.lastError = undefined;
    });
  }

  /**
   * Waits for the first connection, at most `timeoutMs`; resolves either way (a proxy starts while
   * Redis is down and registers once it is up). True when connected.
   */
  async ready(timeoutMs = DEFAULT_COMMAND_TIMEOUT_MS): Promise<boolean> {
    if (this.redis.status === 'ready') return true;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      await once(this.redis, 'ready', { signal });
      return true;
    } catch {
      return false;
    }
  }

  async announce(presence: ProxyPresence, ttlMs: number): Promise<void> {
    await this.run('announce', () => this.redis.gateAnnounce(this.prefix, presence.id, JSON.stringify(presence), ttl(ttlMs)));
  }

  async withdraw(proxyId: string): Promise<void> {
    await this.run('withdraw', () => this.redis.gateWithdraw(this.prefix, proxyId));
  }

  async proxies(): Promise<ProxyPresence[]> {
    return this.readAll(await this.run('proxies', () => this.redis.gateProxies(this.prefix)), parsePresence, 'a presence record');
  }

  async holdTunnel(holding: TunnelHolding, ttlMs: number): Promise<void> {
    await this.run('holdTunnel', () => this.redis.gateHold(this.prefix, holding.agent, holding.proxyId, holding.generation, ttl(ttlMs)));
  }

  async dropTunnel(holding: TunnelHolding): Promise<boolean> {
    return (await this.run('dropTunnel', () => this.redis.gateDrop(this.prefix, holding.agent, holding.proxyId, holding.generation))) === 1;
  }

  async holders(agent: string): Promise<TunnelHolding[]> {
    const flat = await this.run('holders', () => this.redis.gateHolders(this.prefix, agent));
    const out: TunnelHolding[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) out.push({ agent, proxyId: flat[i] as string, generation: Number(flat[i + 1]) });
    return out;
  }

  async putAgentRecord(record: InventoryRecord, ttlMs: number): Promise<void> {
    await this.run('putAgentRecord', () =>
      this.redis.gatePutAgent(this.prefix, record.serverId, record.proxyId, record.generation, JSON.stringify(record), ttl(ttlMs)),
    );
  }

  async dropAgentRecord(key: { serverId: string; proxyId: string; generation: number }): Promise<boolean> {
    return (
      (await this.run('dropAgentRecord', () => this.redis.gateDropAgent(this.prefix, key.serverId, key.proxyId, key.generation))) === 1
    );
  }

  async agentRecords(): Promise<InventoryRecord[]> {
    return this.readAll(
      await this.run('agentRecords', () => this.redis.gateAgents(this.prefix)),
      parseInventoryRecord,
      'an inventory record',
    );
  }

  async getResource(kind: string, name: string): Promise<StoredResource | undefined> {
    const [revision, record] = await this.run('getResource', () =>
      this.redis.hmget(`${this.prefix}resource:${kind}:${name}`, 'revision', 'record'),
    );
    if (revision === null || revision === undefined) return undefined;
    return this.readResource(kind, name, revision, record);
  }

  async listResources(kind: string): Promise<StoredResource[]> {
    const flat = await this.run('listResources', () => this.redis.gateListResources(this.prefix, kind));
    const out: StoredResource[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const resource = this.readResource(kind, flat[i] as string, flat[i + 1], flat[i + 2]);
      if (resource) out.push(resource);
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  async putResource(write: ResourceWrite, mode: PutMode): Promise<StoredResource | undefined> {
    const record = JSON.stringify({ document: write.document, updatedBy: write.updatedBy, updatedAt: write.updatedAt });
    const [how, expected] = typeof mode === 'object' ? ['revision', mode.revision] : [mode, 0];
    const revision = await this.run('putResource', () =>
      this.redis.gatePutResource(this.prefix, write.kind, write.name, how, record, expected),
    );
    if (revision === 0) return undefined;
    return { ...write, document: structuredClone(write.document), revision };
  }

  async holdLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return (await this.run('holdLease', () => this.redis.gateHoldLease(this.prefix, name, holder, ttl(ttlMs)))) === 1;
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    await this.run('releaseLease', () => this.redis.gateReleaseLease(this.prefix, name, holder));
  }

  async deleteResource(kind: string, name: string): Promise<StoredResource | undefined> {
    const held = await this.run('deleteResource', () => this.redis.gateDeleteResource(this.prefix, kind, name));
    if (held.length < 2 || held[0] === null) return undefined;
    return this.readResource(kind, name, held[0], held[1]);
  }

  private readResource(kind: string, name: string, revision: unknown, record: unknown): StoredResource | undefined {
    const resource = parseStoredResource(kind, name, revision, record);
    if (!resource) this.log.warn({ store: this.label, kind, name }, 'a resource in the route store is not one this version reads; skipped');
    return resource;
  }

  /** The records `parse` reads; one another version wrote (a rolling upgrade) is skipped and said so. */
  private readAll<T>(values: string[], parse: (text: string) => T | undefined, what: string): T[] {
    const out: T[] = [];
    for (const value of values) {
      const record = parse(value);
      if (record) out.push(record);
      else this.log.warn({ store: this.label }, `${what} in the route store is not one this version reads; skipped`);
    }
    return out;
  }

  /** open, closing (QUIT sent, waiting for Redis), closed. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /**
   * QUIT once the commands in flight are answered; Redis gets `graceMs` (when given) to answer,
   * then the connection is dropped. When Redis is down, the connection is dropped at once.
   */
  close(options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      if (this.redis.status !== 'ready') return this.redis.disconnect();
      const quit = this.redis.quit().catch(() => this.redis.disconnect());
      if (options.graceMs === undefined) return void (await quit);
      await within(quit, options.graceMs);
      this.redis.disconnect();
    });
  }

  /** Drops the connection now (commands in flight fail with GATE_ERR_STORE_UNAVAILABLE). */
  destroy(_err?: GateError): void {
    if (this.lifecycle.destroy()) this.redis.disconnect();
  }

  /** Whether close() or destroy() was called: commands are refused, reconnects not logged. */
  private get closed(): boolean {
    return this.lifecycle.ending;
  }

  private async run<T>(what: string, command: () => Promise<T>): Promise<T> {
    if (this.closed) throw new GateError(ErrorCodes.STORE_UNAVAILABLE, `route store ${this.label}: closed`);
    try {
      return await command();
    } catch (err) {
      // ioredis's messages name the host and port, never the password. A command refused because
      // there is no connection says why there is none.
      const why = this.redis.status !== 'ready' ? `not connected (${this.lastError ?? this.redis.status})` : (err as Error).message;
      throw new GateError(ErrorCodes.STORE_UNAVAILABLE, `route store ${this.label}: ${what}: ${why}`, { cause: err });
    }
  }
}

/** Whole milliseconds, at least 1 (PX 0 is an error in Redis). */
function ttl(ms: number): number {
  return Math.max(1, Math.ceil(ms));
}

function parsePresence(text: string): ProxyPresence | undefined {
  try {
    const value = JSON.parse(text) as Partial<ProxyPresence>;
    if (
      typeof value.id !== 'string' ||
      typeof value.peerAddr !== 'string' ||
      typeof value.version !== 'string' ||
      typeof value.draining !== 'boolean' ||
      typeof value.channelFingerprint !== 'string'
    )
      return undefined;
    return {
      id: value.id,
      peerAddr: value.peerAddr,
      version: value.version,
      draining: value.draining,
      channelFingerprint: value.channelFingerprint,
    };
  } catch {
    return undefined;
  }
}
