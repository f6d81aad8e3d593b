import { fetchText } from '../client/fetch-text.js';
import { channelNameProblem, CRITICAL_NO, CRITICAL_YES, NO_VERSION } from '../config/channel.js';
import { ErrorCodes, GateError } from '../errors.js';
import { CHANNEL_PATH_PREFIX, CHANNEL_VERB_CRITICAL, CHANNEL_VERB_VERSION } from '../wire/names.js';
import { formatVersion, parseVersion } from '../vocabulary/semver.js';

/** How the updater reaches the proxy: shared by the channel questions and the schedule export. */
export interface ProxyRequestOptions {
  /** The proxy's web address: `https://host:port` (a bare `host:port` means https). */
  proxy: string;
  /** CA for the proxy's certificate; default: Node's trust store. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** The name the proxy's certificate must carry when `proxy` names it otherwise (an IP). */
  serverName?: string;
  /**
   * Accept an `http://` proxy address. Off by default: the answers decide what gets installed, so
   * they must come from a verified server; only an operator's explicit flag turns it on.
   */
  allowHttp?: boolean;
  /** Where HTTPS_PROXY / HTTP_PROXY / NO_PROXY come from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

export interface FetchTargetVersionOptions extends ProxyRequestOptions {
  /** Channel name, `default` or e.g. `stable/cloud`. */
  channel?: string;
}

/** `proxy` with its scheme (https unless given) and without trailing slashes, `path` appended. */
export function proxyUrl(proxy: string, path: string): string {
  const base = /^[a-z][a-z0-9+.-]*:\/\//i.test(proxy) ? proxy : `https://${proxy}`;
  return `${base.replace(/\/+$/, '')}${path}`;
}

/** The channel endpoint's URL for `channel` on `proxy`. */
export function channelVersionUrl(proxy: string, channel: string): string {
  return proxyUrl(proxy, `${CHANNEL_PATH_PREFIX}/${channel}/${CHANNEL_VERB_VERSION}`);
}

/** The channel's critical endpoint on `proxy`. */
export function channelCriticalUrl(proxy: string, channel: string): string {
  return proxyUrl(proxy, `${CHANNEL_PATH_PREFIX}/${channel}/${CHANNEL_VERB_CRITICAL}`);
}

/** The `{"error":{"message"}}` of a proxy's error answer, as `: message`, or ''. */
function errorDetail(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } };
    if (typeof parsed.error?.message === 'string') return `: ${parsed.error.message}`;
  } catch {
    // not JSON: the status says enough
  }
  return '';
}

/**
 * GET `url` from the proxy through the environment proxy (HTTPS_PROXY / NO_PROXY). Refuses
 * `http://` unless allowed (GATE_ERR_UPGRADE_INSECURE); a non-200 answer becomes a GateError with
 * `failCode`, naming `what`. Returns the status-200 body.
 */
export async function getFromProxy(
  url: string,
  options: ProxyRequestOptions,
  what: string,
  failCode: GateError['code'],
  maxBytes: number,
): Promise<string> {
  return (await fetchFromProxy(url, options, what, failCode, maxBytes, false))!;
}

/** `getFromProxy`; with `missingIsUndefined`, a 404 answer is undefined (an endpoint the proxy may not serve). */
export async function fetchFromProxy(
  url: string,
  options: ProxyRequestOptions,
  what: string,
  failCode: GateError['code'],
  maxBytes: number,
  missingIsUndefined: boolean,
): Promise<string | undefined> {
  if (/^http:/i.test(url) && !options.allowHttp) {
    throw new GateError(
      ErrorCodes.UPGRADE_INSECURE,
      `${url}: refusing plain http for ${what} (the answer decides what is installed); use https, or allow http explicitly`,
    );
  }
  const result = await fetchText(url, {
    // The proxy is the platform's own: HTTPS_PROXY, else HTTP_PROXY, as for the agent's tunnel.
    proxyRule: 'dial-back',
    ...(options.ca === undefined ? {} : { ca: options.ca }),
    ...(options.serverName === undefined ? {} : { servername: options.serverName }),
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    maxBytes,
  });
  if (result.status === 404 && missingIsUndefined) return undefined;
  if (result.status !== 200) throw new GateError(failCode, `${what} at ${url} answered HTTP ${result.status}${errorDetail(result.body)}`);
  return result.body;
}

function checkedChannel(options: FetchTargetVersionOptions): string {
  const channel = options.channel ?? 'default';
  const problem = channelNameProblem(channel);
  if (problem) throw new GateError(ErrorCodes.UPGRADE_CHANNEL, `channel ${JSON.stringify(channel)}: ${problem}`);
  return channel;
}

/**
 * The version a channel offers (`1.2.3`, leading `v` stripped), or undefined when it answers
 * `none`. Fetched through the environment proxy (HTTPS_PROXY / NO_PROXY), like every request the
 * updater makes. Errors: GATE_ERR_UPGRADE_CHANNEL (bad name, non-200 answer, not a version),
 * GATE_ERR_UPGRADE_INSECURE and the fetch errors (GATE_ERR_FETCH_*).
 */
export async function fetchTargetVersion(options: FetchTargetVersionOptions): Promise<string | undefined> {
  const channel = checkedChannel(options);
  const body = (
    await getFromProxy(channelVersionUrl(options.proxy, channel), options, `channel ${channel}`, ErrorCodes.UPGRADE_CHANNEL, 1024)
  ).trim();
  if (body === NO_VERSION) return undefined;
  try {
    return formatVersion(parseVersion(body));
  } catch (err) {
    throw new GateError(ErrorCodes.UPGRADE_CHANNEL, `channel ${channel} answered ${JSON.stringify(body.slice(0, 40))}, not a version`, {
      cause: err,
    });
  }
}

/**
 * Whether the channel marks its current version critical (`yes` / `no` from
 * `/channel/<name>/critical`), or undefined when the proxy does not serve that endpoint (404: the
 * platform's document defines only `/version`, so a proxy may not). Same transport and errors as
 * fetchTargetVersion.
 */
export async function fetchCritical(options: FetchTargetVersionOptions): Promise<boolean | undefined> {
  const channel = checkedChannel(options);
  const answer = await fetchFromProxy(
    channelCriticalUrl(options.proxy, channel),
    options,
    `channel ${channel} (critical)`,
    ErrorCodes.UPGRADE_CHANNEL,
    1024,
    true,
  );
  if (answer === undefined) return undefined;
  const body = answer.trim();
  if (body === CRITICAL_YES) return true;
  if (body === CRITICAL_NO) return false;
  throw new GateError(
    ErrorCodes.UPGRADE_CHANNEL,
    `channel ${channel} answered ${JSON.stringify(body.slice(0, 40))} to critical, not yes or no`,
  );
}
