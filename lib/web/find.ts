import { ErrorCodes } from '../errors.js';
import { DEFAULT_UPDATE_GROUP, FIND_PATH, isValidUpdateGroup } from '../wire/names.js';
import { pathOf } from './channel-path.js';

/**
 * `GET /v1/webapi/find?host=<server id>&group=<group>`: what an updater asks the cluster when it
 * has an `autoupdate_config` (docs/updates.md, "Rollouts"). Unauthenticated, like the channels: the
 * question names nothing secret and the answer says only which version a host should run. Bounded:
 * a query of at most 1 KiB, a host that is a server ID (a UUID), a group that is a group name.
 */

/** The longest query read: a UUID and a group name are some hundred bytes. */
export const MAX_FIND_QUERY_BYTES = 1024;

/** What the updater is answered, under `auto_update` (the keys the platform's find answer uses). */
export interface FindAutoUpdate {
  managed: boolean;
  agent_version?: string;
  agent_auto_update?: boolean;
  reason?: string;
}

export type FindQuery =
  | { kind: 'other' }
  | { kind: 'find'; host: string; group: string }
  | { kind: 'invalid'; code: string; reason: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Reads a request target for the find endpoint. Pure. */
export function parseFindQuery(target: string): FindQuery {
  if (pathOf(target) !== FIND_PATH) return { kind: 'other' };
  const mark = target.indexOf('?');
  const query = mark < 0 ? '' : target.slice(mark + 1).split('#', 1)[0]!;
  const invalid = (reason: string): FindQuery => ({ kind: 'invalid', code: ErrorCodes.INVALID_ARGUMENT, reason });
  if (Buffer.byteLength(query) > MAX_FIND_QUERY_BYTES) return invalid(`the query is longer than ${MAX_FIND_QUERY_BYTES} bytes`);
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(query);
  } catch {
    return invalid('the query is not a URL query');
  }
  const hosts = params.getAll('host');
  const groups = params.getAll('group');
  if (hosts.length !== 1 || !UUID.test(hosts[0]!)) return invalid('host: expected one server ID (a UUID, as gate-mux inventory ls shows)');
  if (groups.length > 1 || (groups.length === 1 && !isValidUpdateGroup(groups[0]!)))
    return invalid('group: expected one group name (letters, digits, ".", "_", "-", at most 64)');
  return { kind: 'find', host: hosts[0]!.toLowerCase(), group: groups[0] ?? DEFAULT_UPDATE_GROUP };
}
