import { channelNameProblem, CRITICAL_NO, CRITICAL_YES, normalizeVersion, NO_VERSION, type ChannelConfig } from '../config/channel.js';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';

/**
 * The automatic-upgrade channel registry behind `GET /v1/webapi/automaticupgrades/channel/<name>/version`
 * and `.../<name>/critical`.
 * `default` always exists and serves the proxy's own version unless configured; a channel serves a
 * static version or forwards to another server, whose answer (version or failure) is cached.
 */

export interface FetchTextResult {
  status: number;
  body: string;
}

/**
 * Fetches a URL's body as text. The real one goes through the environment's proxy (HTTPS_PROXY,
 * NO_PROXY); it must give up after `timeoutMs`.
 */
export type FetchText = (url: string, options: { timeoutMs: number }) => Promise<FetchTextResult>;

export interface VersionChannelsOptions {
  channels: Record<string, ChannelConfig>;
  /** The proxy's own version (`1.2.3` or `v1.2.3`), served by `default` unless it is configured. */
  proxyVersion: string;
  /** Needed when any channel forwards. */
  fetchText?: FetchText;
  /** Milliseconds a forwarded answer, value or failure, is reused. Default one minute. */
  cacheTtlMs?: number;
  /** Milliseconds allowed for a forwarded fetch. Default 5 s. */
  timeoutMs?: number;
  /** Clock in milliseconds, injectable for tests. Default `Date.now`. */
  now?: () => number;
  logger?: Logger;
}

export const DEFAULT_CHANNEL = 'default';
const DEFAULT_CACHE_TTL_MS = 60_000;
const DEFAULT_TIMEOUT_MS = 5_000;
/** A version answer is a short line; anything longer is not one (and is not kept in memory). */
const MAX_UPSTREAM_BODY = 256;

type Outcome = { ok: true; value: string } | { ok: false; error: GateError };

/** The two questions a channel answers. */
type Verb = 'version' | 'critical';

/** The URL without userinfo, safe to put in messages and logs. */
function redact(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.href;
  } catch {
    return '<invalid url>';
  }
}

export class VersionChannels {
  private readonly channels = new Map<string, ChannelConfig>();
  private readonly fetchText: FetchText | undefined;
  private readonly cacheTtlMs: number;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly cache = new Map<string, { expiresAt: number; outcome: Outcome }>();
  /** One fetch per channel at a time: concurrent requests share it instead of stampeding upstream. */
  private readonly inFlight = new Map<string, Promise<Outcome>>();

  constructor(options: VersionChannelsOptions) {
    this.fetchText = options.fetchText;
    this.cacheTtlMs = options.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.now = options.now ?? Date.now;
    this.log = componentLogger(options.logger, 'version-channels');
    const own = normalizeVersion(options.proxyVersion);
    if (own === undefined) {
      throw new GateError(ErrorCodes.CONFIG_INVALID, `proxy version "${options.proxyVersion}" is not a semantic version`);
    }
    this.channels.set(DEFAULT_CHANNEL, { kind: 'static', version: own });
    for (const [name, channel] of Object.entries(options.channels)) {
      const problem = channelNameProblem(name);
      if (problem) throw new GateError(ErrorCodes.CONFIG_INVALID, `channel "${name}": ${problem}`);
      if (channel.kind === 'forward') {
        if (!this.fetchText) {
          throw new GateError(ErrorCodes.CONFIG_INVALID, `channel "${name}" forwards to ${redact(channel.url)} but no fetchText was given`);
        }
        // Its answer is installed as root by every enrolled agent: not in plain HTTP unless asked for.
        if (!/^https:/i.test(channel.url) && channel.insecure !== true) {
          throw new GateError(
            ErrorCodes.CONFIG_INVALID,
            `channel "${name}" forwards to ${redact(channel.url)} in plain HTTP: use https://, or say insecure: true (allow_insecure_forward_url)`,
          );
        }
        this.channels.set(name, channel);
      } else {
        const version = normalizeVersion(channel.version);
        if (version === undefined) {
          throw new GateError(ErrorCodes.CONFIG_INVALID, `channel "${name}": "${channel.version}" is not a semantic version`);
        }
        this.channels.set(name, { kind: 'static', version, ...(channel.critical ? { critical: true } : {}) });
      }
    }
  }

  /** Channel names, `default` included. */
  names(): string[] {
    return [...this.channels.keys()];
  }

  /**
   * The version a channel serves (`v1.2.3` or `none`). Throws GateError with
   * GATE_ERR_CHANNEL_NAME_INVALID, GATE_ERR_CHANNEL_NOT_FOUND or GATE_ERR_CHANNEL_UPSTREAM.
   */
  async version(name: string): Promise<string> {
    const channel = this.lookup(name);
    if (channel.kind === 'static') return channel.version;
    return this.forwarded(name, channel.url, 'version');
  }

  /**
   * Whether the channel's current version is critical: `yes` or `no`. A static channel answers
   * from its `critical` flag; a forwarded one asks `<forward_url>/critical`, with the same cache,
   * deadline and errors as `version` (its answers are cached apart from the version's).
   */
  async critical(name: string): Promise<string> {
    const channel = this.lookup(name);
    if (channel.kind === 'static') return channel.critical ? CRITICAL_YES : CRITICAL_NO;
    return this.forwarded(name, channel.url, 'critical');
  }

  private lookup(name: string): ChannelConfig {
    const problem = channelNameProblem(name);
    if (problem) throw new GateError(ErrorCodes.CHANNEL_NAME_INVALID, problem);
    const channel = this.channels.get(name);
    if (!channel) throw new GateError(ErrorCodes.CHANNEL_NOT_FOUND, `no channel named "${name}"`);
    return channel;
  }

  private async forwarded(name: string, baseUrl: string, verb: Verb): Promise<string> {
    // Channel names hold no space, so `<verb> <name>` keys never collide.
    const key = `${verb} ${name}`;
    const cached = this.cache.get(key);
    let outcome: Outcome;
    if (cached && this.now() < cached.expiresAt) {
      outcome = cached.outcome;
    } else {
      let pending = this.inFlight.get(key);
      if (!pending) {
        pending = this.fetchOutcome(name, `${baseUrl}/${verb}`, verb).then((fetched) => {
          this.cache.set(key, { expiresAt: this.now() + this.cacheTtlMs, outcome: fetched });
          this.inFlight.delete(key);
          return fetched;
        });
        this.inFlight.set(key, pending);
      }
      outcome = await pending;
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  private async fetchOutcome(name: string, url: string, verb: Verb): Promise<Outcome> {
    const where = `channel "${name}" upstream ${redact(url)}`;
    const fail = (reason: string, cause?: unknown): Outcome => {
      const error = new GateError(ErrorCodes.CHANNEL_UPSTREAM, `${where}: ${reason}`, { cause });
      this.log.warn({ err: error, channel: name, verb }, 'forwarded version channel failed');
      return { ok: false, error };
    };
    let timer: NodeJS.Timeout | undefined;
    try {
      // Our own deadline as well as the fetcher's: a fetcher that ignores `timeoutMs` must not hold
      // every request for this channel (they share the one in-flight fetch).
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new GateError(ErrorCodes.FETCH_TIMEOUT, `no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
      });
      const result = await Promise.race([this.fetchText!(url, { timeoutMs: this.timeoutMs }), deadline]);
      if (result.status !== 200) return fail(`answered HTTP ${result.status}`);
      const body = result.body.trim();
      if (body.length > MAX_UPSTREAM_BODY) return fail(`answered with a body too long to be a ${verb} answer`);
      if (verb === 'critical') {
        if (body === CRITICAL_YES || body === CRITICAL_NO) return { ok: true, value: body };
        return fail(`answered "${body.slice(0, 40)}", not yes or no`);
      }
      if (body === NO_VERSION) return { ok: true, value: NO_VERSION };
      const version = normalizeVersion(body);
      if (version === undefined) return fail(`answered "${body.slice(0, 40)}", not a version`);
      return { ok: true, value: version };
    } catch (err) {
      return fail((err as Error).message || String(err), err);
    } finally {
      clearTimeout(timer);
    }
  }
}
