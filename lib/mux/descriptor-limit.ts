import { readFileSync } from 'node:fs';

/**
 * The connection cap a process can afford from its open-file limit (RLIMIT_NOFILE). Node has no
 * API for the limit; on Linux `/proc/self/limits` says it. Node raises its soft limit to the hard
 * limit when it starts (src/node.cc, PlatformInit), so the soft limit read here is what the
 * process really has: `ulimit -n` or systemd's `LimitNOFILE`.
 *
 * Each routed connection holds two descriptors (client and upstream, also while the upstream is
 * being dialed), so the cap is half of what is left after a reserve for everything else: the
 * listeners, stdio and the event loop's own descriptors (about 20 when Node starts), log files,
 * certificate and CA files read on reload, DNS lookups, forwarded version-channel fetches.
 * Refusing at this cap keeps connections already routed able to dial, where the
 * kernel's own limit (EMFILE) would fail them half-way instead.
 */

/** Descriptors kept back whatever the limit. */
export const RESERVED_DESCRIPTORS = 64;
/** And a sixteenth of the limit on top, for what grows with load (dials in flight, DNS, logs). */
export const RESERVED_FRACTION = 1 / 16;
/**
 * Used when the limit cannot be read (not Linux, /proc not mounted, or "unlimited"): the usual
 * default soft limit on Linux and the BSDs. macOS starts processes at 256 but Node raises it to
 * the hard limit, so 1024 errs on the safe side there too; set `max_connections` to go higher.
 */
export const ASSUMED_OPEN_FILES = 1024;

export interface DescriptorCap {
  /** Open connections allowed. */
  cap: number;
  /** The soft open-file limit the cap comes from. */
  openFiles: number;
  /** `proc`: read from /proc/self/limits; `assumed`: ASSUMED_OPEN_FILES (the limit was unknown). */
  source: 'proc' | 'assumed';
}

/** The soft "Max open files" limit in the text of /proc/<pid>/limits; undefined when absent or unlimited. */
export function softOpenFilesLimit(limitsText: string): number | undefined {
  for (const line of limitsText.split('\n')) {
    if (!line.startsWith('Max open files')) continue;
    const [soft] = line.slice('Max open files'.length).trim().split(/\s+/);
    const n = Number(soft);
    return Number.isSafeInteger(n) && n > 0 ? n : undefined;
  }
  return undefined;
}

/** Connections `openFiles` descriptors can carry: (limit - reserve) / 2, at least 1. */
export function connectionCapFor(openFiles: number): number {
  const reserve = RESERVED_DESCRIPTORS + Math.floor(openFiles * RESERVED_FRACTION);
  return Math.max(1, Math.floor((openFiles - reserve) / 2));
}

/** The cap from the text of /proc/self/limits (or undefined when it could not be read). */
export function descriptorCapFrom(limitsText: string | undefined): DescriptorCap {
  const soft = limitsText === undefined ? undefined : softOpenFilesLimit(limitsText);
  if (soft === undefined) return { cap: connectionCapFor(ASSUMED_OPEN_FILES), openFiles: ASSUMED_OPEN_FILES, source: 'assumed' };
  return { cap: connectionCapFor(soft), openFiles: soft, source: 'proc' };
}

/** This process's cap, read once from /proc/self/limits. */
export function processDescriptorCap(): DescriptorCap {
  let text: string | undefined;
  try {
    text = readFileSync('/proc/self/limits', 'utf8');
  } catch {
    text = undefined; // not Linux: the assumed limit, said so in the start-up log line
  }
  return descriptorCapFrom(text);
}

/** How a cap was arrived at, for the start-up log line. */
export function describeCap(cap: DescriptorCap): string {
  const reserve = cap.openFiles - 2 * cap.cap;
  return cap.source === 'proc'
    ? `(open-file limit ${cap.openFiles} - ${reserve} reserved) / 2 descriptors per connection`
    : `open-file limit unknown on this system, assumed ${cap.openFiles}: (${cap.openFiles} - ${reserve} reserved) / 2`;
}
