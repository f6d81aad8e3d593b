import { fetchText } from '../client/fetch-text.js';
import { channelNameProblem, NO_VERSION } from '../config/channel.js';
import { ErrorCodes, GateError } from '../errors.js';
import { CHANNEL_PATH_PREFIX } from '../wire/names.js';
import { formatVersion, parseVersion } from './semver.js';

export interface FetchTargetVersionOptions {
  /** The proxy's web address: `https://host:port` (a bare `host:port` means https). */
  proxy: string;
  /** Channel name, `default` or e.g. `stable/cloud`. */
  channel?: string;
  /** CA for the proxy's certificate. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Where HTTPS_PROXY / NO_PROXY come from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

/** The channel endpoint's URL for `channel` on `proxy`. */
export function channelVersionUrl(proxy: string, channel: string): string {
  const base = /^[a-z][a-z0-9+.-]*:\/\//i.test(proxy) ? proxy : `https://${proxy}`;
  return `${base.replace(/\/+$/, '')}${CHANNEL_PATH_PREFIX}/${channel}/version`;
}

/**
 * The version a channel offers (`1.2.3`, leading `v` stripped), or undefined when it answers
 * `none`. Fetched through the environment proxy (HTTPS_PROXY / NO_PROXY), like every request the
 * updater makes. Errors: GATE_ERR_UPGRADE_CHANNEL (bad name, non-200 answer, not a version) and
 * the fetch errors (GATE_ERR_FETCH_*).
 */
export async function fetchTargetVersion(options: FetchTargetVersionOptions): Promise<string | undefined> {
  const channel = options.channel ?? 'default';
  const problem = channelNameProblem(channel);
  if (problem) throw new GateError(ErrorCodes.UPGRADE_CHANNEL, `channel ${JSON.stringify(channel)}: ${problem}`);
  const url = channelVersionUrl(options.proxy, channel);
  const result = await fetchText(url, {
    ...(options.ca === undefined ? {} : { ca: options.ca }),
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    maxBytes: 1024,
  });
  if (result.status !== 200) {
    let detail = '';
    try {
      const parsed = JSON.parse(result.body) as { error?: { message?: unknown } };
      if (typeof parsed.error?.message === 'string') detail = `: ${parsed.error.message}`;
    } catch {
      // not JSON: the status says enough
    }
    throw new GateError(ErrorCodes.UPGRADE_CHANNEL, `channel ${channel} at ${url} answered HTTP ${result.status}${detail}`);
  }
  const body = result.body.trim();
  if (body === NO_VERSION) return undefined;
  try {
    return formatVersion(parseVersion(body));
  } catch (err) {
    throw new GateError(ErrorCodes.UPGRADE_CHANNEL, `channel ${channel} answered ${JSON.stringify(body.slice(0, 40))}, not a version`, { cause: err });
  }
}
