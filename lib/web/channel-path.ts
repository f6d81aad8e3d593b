import { channelNameProblem } from '../config/channel.js';
import { CHANNEL_PATH_PREFIX } from '../wire/names.js';

export type ChannelPath =
  /** Not under the channel prefix: someone else's path. */
  | { kind: 'other' }
  | { kind: 'channel'; name: string; verb: string }
  /** Under the prefix but unusable: answer 400 with `reason`. */
  | { kind: 'invalid'; reason: string };

/** The path part of a request target, without query or fragment. */
export function pathOf(target: string): string {
  const end = target.search(/[?#]/);
  return end < 0 ? target : target.slice(0, end);
}

/**
 * Splits `/v1/webapi/automaticupgrades/channel/<name...>/<verb>`: the last segment is the verb and
 * the rest, slashes included (`stable/cloud`), is the name. Pure. Percent-encoding is refused
 * outright: allowed names never need it, and decoding `%2F` would let one name be spelled two ways
 * (and smuggle `..` past the segment check).
 */
export function parseChannelPath(target: string): ChannelPath {
  const path = pathOf(target);
  if (path !== CHANNEL_PATH_PREFIX && !path.startsWith(`${CHANNEL_PATH_PREFIX}/`)) return { kind: 'other' };
  const rest = path.slice(CHANNEL_PATH_PREFIX.length + 1);
  if (rest.includes('%')) return { kind: 'invalid', reason: 'percent-encoded characters are not allowed in a channel path' };
  const slash = rest.lastIndexOf('/');
  if (slash < 0) return { kind: 'invalid', reason: 'expected /channel/<name>/version' };
  const name = rest.slice(0, slash);
  const verb = rest.slice(slash + 1);
  if (verb === '') return { kind: 'invalid', reason: 'a channel path may not end with "/"' };
  const problem = channelNameProblem(name);
  if (problem) return { kind: 'invalid', reason: problem };
  return { kind: 'channel', name, verb };
}
