import { ErrorCodes, GateError } from '../errors.js';
import { FIND_PATH } from '../wire/names.js';
import { formatVersion, parseVersion } from '../vocabulary/semver.js';
import { fetchFromProxy, proxyUrl, type ProxyRequestOptions } from './target-version.js';

/**
 * What the cluster's rollout says to one agent (`GET /v1/webapi/find`). Not managed: the cluster
 * has no rollout configured, and the updater asks its channel as before. Managed: `agentVersion`
 * is the version this agent should run, and `now` whether to install it now (the rollout has
 * reached this agent); `reason` says why not yet, or why halted.
 */
export type FindAnswer = { managed: false } | { managed: true; agentVersion: string; now: boolean; reason: string };

export interface FindOptions extends ProxyRequestOptions {
  /** The agent's server ID (its inventory key, `serverIdForName` of its name). */
  host: string;
  /** The agent's update group (`updater.group`, default `default`). */
  group: string;
}

/** The answer is a few dozen bytes; a proxy's error body is bounded the same. */
export const MAX_FIND_BYTES = 4096;
/** A reason is a line for an operator: longer is cut. */
export const MAX_FIND_REASON = 256;
// Control and bidirectional characters: nothing the network sends may forge a second line on the
// operator's terminal or in a log.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's job.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function bad(why: string): GateError {
  return new GateError(ErrorCodes.UPGRADE_FIND, `the proxy's rollout answer is refused: ${why}`);
}

/**
 * Reads the find answer's JSON body. Refused (GATE_ERR_UPGRADE_FIND) unless it is an object with
 * `auto_update.managed` a boolean and, when managed, `agent_version` a semantic version and
 * `agent_auto_update` a boolean: what decides an install as root is never guessed. `reason` is
 * optional; control characters are removed and it is cut to MAX_FIND_REASON. Pure.
 */
export function parseFindAnswer(body: string): FindAnswer {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    throw bad('not JSON');
  }
  const update = (value as { auto_update?: unknown } | null)?.auto_update;
  if (typeof update !== 'object' || update === null || Array.isArray(update)) throw bad('no auto_update object');
  const raw = update as Record<string, unknown>;
  if (typeof raw.managed !== 'boolean') throw bad('auto_update.managed is not true or false');
  if (!raw.managed) return { managed: false };
  if (typeof raw.agent_version !== 'string') throw bad('auto_update.agent_version is not a string');
  let agentVersion: string;
  try {
    agentVersion = formatVersion(parseVersion(raw.agent_version));
  } catch {
    throw bad(`auto_update.agent_version ${JSON.stringify(raw.agent_version.slice(0, 40))} is not a version`);
  }
  if (typeof raw.agent_auto_update !== 'boolean') throw bad('auto_update.agent_auto_update is not true or false');
  if (raw.reason !== undefined && typeof raw.reason !== 'string') throw bad('auto_update.reason is not a string');
  const reason = (raw.reason ?? '').replace(UNPRINTABLE, '').trim().slice(0, MAX_FIND_REASON);
  return { managed: true, agentVersion, now: raw.agent_auto_update, reason };
}

/** The find URL for one agent on `proxy`. */
export function findUrl(proxy: string, host: string, group: string): string {
  return proxyUrl(proxy, `${FIND_PATH}?${new URLSearchParams({ host, group }).toString()}`);
}

/**
 * Asks the proxy what the rollout says to this agent, with the channel questions' transport and
 * limits (HTTPS verified, environment proxy, the same deadline; MAX_FIND_BYTES). Undefined when
 * the proxy answers 404 (a proxy without rollouts): the caller asks the channel, as it does for
 * `{managed: false}`. Errors: GATE_ERR_UPGRADE_FIND (any other status but 200, or a body
 * parseFindAnswer refuses), GATE_ERR_UPGRADE_INSECURE, and the fetch errors (GATE_ERR_FETCH_*).
 */
export async function fetchFind(options: FindOptions): Promise<FindAnswer | undefined> {
  const body = await fetchFromProxy(
    findUrl(options.proxy, options.host, options.group),
    options,
    'the rollout (find)',
    ErrorCodes.UPGRADE_FIND,
    MAX_FIND_BYTES,
    true,
  );
  return body === undefined ? undefined : parseFindAnswer(body);
}
