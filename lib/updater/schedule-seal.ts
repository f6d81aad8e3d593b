import { createHash } from 'node:crypto';
import { ErrorCodes, GateError } from '../errors.js';

/**
 * The schedule file's first line: a checksum of the rest. A schedule rewritten in place (a
 * non-root agent owns the file but not its directory, so it cannot rename a new one over it) may
 * be read while half written; the mix of old and new lines can be valid YAML naming a window
 * nobody configured. The checksum turns every such mix into "no valid schedule" instead. The line
 * comes first, and has a fixed length, so any torn state of a write starts with a checksum line
 * that does not match. Pure.
 */
const PREFIX = '# gate-upgrade checksum sha256:';

function digest(body: string): string {
  return createHash('sha256').update(body).digest('hex');
}

/** `body` with its checksum line in front: what export-schedule writes. */
export function sealSchedule(body: string): string {
  return `${PREFIX}${digest(body)}\n${body}`;
}

/**
 * The schedule text of a file: the body when the checksum matches, an Error when it does not (a
 * torn or edited file); a file without the line (written by hand, or before checksums) as it is.
 */
export function unsealSchedule(text: string): string | GateError {
  if (!text.startsWith(PREFIX)) return text;
  const newline = text.indexOf('\n');
  const body = newline < 0 ? '' : text.slice(newline + 1);
  const want = text.slice(PREFIX.length, newline < 0 ? undefined : newline);
  if (want !== digest(body))
    return new GateError(
      ErrorCodes.UPGRADE_SCHEDULE_INVALID,
      'its checksum does not match its content (written while read, or edited by hand: remove the checksum line to keep an edit)',
    );
  return body;
}
