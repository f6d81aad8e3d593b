import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { writeFileAtomic } from './atomic-write.js';
import { compareVersions, formatVersion, parseVersion } from '../vocabulary/semver.js';

/**
 * How the updater learns that the agent it just updated works: the agent writes `ready.json` in
 * its state directory each time its tunnels come up or go down (its version, its pid, whether a
 * tunnel is up, when), and the updater reads it back. Local and needing nothing from the network:
 * it holds when the proxy is unreachable from the updater or the package's restart took a while,
 * and a crashed agent cannot claim readiness because its pid is checked too.
 */
export interface AgentReadiness {
  version: string;
  pid: number;
  /** At least one tunnel to a proxy is up (registered: the proxy admitted this version). */
  tunnelUp: boolean;
  /** When it was written, ISO 8601. */
  at: string;
}

export const READY_FILE = 'ready.json';
const MAX_READY_BYTES = 1024;

/** Parses the file's text; undefined when it is not a readiness record. Pure. */
export function parseReadiness(text: string): AgentReadiness | undefined {
  if (Buffer.byteLength(text) > MAX_READY_BYTES) return undefined;
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { pid, tunnelUp, at } = raw;
  if (!Number.isSafeInteger(pid) || (pid as number) <= 0 || typeof tunnelUp !== 'boolean' || typeof at !== 'string') return undefined;
  if (typeof raw.version !== 'string' || Number.isNaN(Date.parse(at))) return undefined;
  try {
    return { version: formatVersion(parseVersion(raw.version)), pid: pid as number, tunnelUp, at };
  } catch {
    return undefined;
  }
}

export async function readReadiness(stateDir: string): Promise<AgentReadiness | undefined> {
  try {
    return parseReadiness(await readFile(join(stateDir, READY_FILE), 'utf8'));
  } catch {
    return undefined;
  }
}

/** Written atomically, so the updater never reads half a record. */
export async function writeReadiness(stateDir: string, readiness: AgentReadiness): Promise<void> {
  // Owned by whoever the agent runs as now, whoever wrote the file before (atomic-write.ts).
  await writeFileAtomic(join(stateDir, READY_FILE), `${JSON.stringify(readiness)}\n`, { keepOwner: false });
}

/** Whether a process with this pid exists (EPERM: it exists, owned by another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Why a readiness record does not show `version` running with a tunnel up; undefined when it does. */
export function notReadyBecause(readiness: AgentReadiness | undefined, version: string, alive = processAlive): string | undefined {
  if (!readiness) return 'the agent wrote no readiness file';
  if (compareVersions(readiness.version, version) !== 0) return `the agent reports version ${readiness.version}, not ${version}`;
  if (!alive(readiness.pid)) return `the agent (pid ${readiness.pid}) is not running`;
  if (!readiness.tunnelUp) return `the agent ${readiness.version} (pid ${readiness.pid}) has no tunnel up`;
  return undefined;
}

/**
 * Polls the readiness file until it shows `version` running (live pid) with a tunnel up, or
 * `timeoutMs` has passed. Returns undefined when ready, else the last reason it was not.
 */
export async function waitReady(
  stateDir: string,
  version: string,
  options: { timeoutMs: number; pollMs?: number },
): Promise<string | undefined> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const why = notReadyBecause(await readReadiness(stateDir), version);
    if (why === undefined) return undefined;
    if (Date.now() >= deadline) return why;
    await sleep(Math.min(options.pollMs ?? 250, Math.max(1, deadline - Date.now())));
  }
}
