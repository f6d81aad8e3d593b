/**
 * Names and values of automatic-upgrade channels, shared by the configuration loader (which checks
 * them at load) and the web endpoint (which checks names taken from request paths).
 */

/**
 * A channel serves a fixed version (which the operator may mark critical: updaters then install it
 * without waiting for the maintenance window), or forwards both questions to another server's channel.
 */
export type ChannelConfig =
  | { kind: 'static'; version: string; critical?: boolean }
  /** `insecure`: a plain http:// `url` was asked for explicitly (`allow_insecure_forward_url`); refused without it. */
  | { kind: 'forward'; url: string; insecure?: boolean };

export const MAX_CHANNEL_NAME_LENGTH = 128;

/**
 * Why a channel name is refused, or undefined when it is acceptable. Names are slash-separated
 * segments of `[a-z0-9._-]` (`stable/cloud`); empty, `.` and `..` segments are refused so a name can
 * never be read as a path step when it reaches a forwarded URL or a log line.
 */
export function channelNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'the channel name is empty';
  if (name.length > MAX_CHANNEL_NAME_LENGTH) {
    return `the channel name is longer than ${MAX_CHANNEL_NAME_LENGTH} characters`;
  }
  if (!/^[a-z0-9._/-]+$/.test(name)) {
    return 'a channel name may only hold lower-case letters, digits, ".", "_", "-" and "/"';
  }
  for (const segment of name.split('/')) {
    if (segment === '') return 'a channel name may not have an empty segment';
    if (segment === '.' || segment === '..') return `a channel name may not have a "${segment}" segment`;
  }
  return undefined;
}

// Semantic Versioning 2.0.0 §2, §9, §10: MAJOR.MINOR.PATCH without leading zeros, optional
// pre-release and build metadata.
const NUM = '(?:0|[1-9][0-9]*)';
const PRE_ID = '(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)';
const SEMVER = new RegExp(`^v?${NUM}\\.${NUM}\\.${NUM}(?:-${PRE_ID}(?:\\.${PRE_ID})*)?(?:\\+[0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*)?$`);

/**
 * The version as channels serve it (`v1.2.3`, a leading `v` added when missing), or undefined when
 * the text is not a semantic version.
 */
export function normalizeVersion(text: string): string | undefined {
  const trimmed = text.trim();
  if (!SEMVER.test(trimmed)) return undefined;
  return trimmed.startsWith('v') ? trimmed : `v${trimmed}`;
}

/** What a channel answers when it has no version to offer (the platform's "none"). */
export const NO_VERSION = 'none';

/** What `/channel/<name>/critical` answers: the channel's current version is critical, or not. */
export const CRITICAL_YES = 'yes';
export const CRITICAL_NO = 'no';
