import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from './atomic-write.js';
import { formatVersion, parseVersion } from '../vocabulary/semver.js';

/**
 * The updater's record of its latest install, for the cluster: `gate-upgrade run` writes it in the
 * agent's state directory, the agent reads it and adds it to its self-description, so the
 * inventory (and a rollout controller) sees that this agent was told to update and what came of
 * it — above all a revert, which the version alone does not show (the agent is back on the old one).
 */
export interface LastUpdate {
  from: string;
  to: string;
  /** `installed`: the new version runs and is ready; `reverted`: it was not, the old one is back. */
  outcome: 'installed' | 'reverted';
  /** Why it was reverted (or `ready`), one line. */
  reason: string;
  /** When the updater finished, ISO 8601. */
  at: string;
}

export const LAST_UPDATE_FILE = 'last-update.json';
/** The record is a few hundred bytes: a larger file is not ours. */
export const MAX_LAST_UPDATE_BYTES = 1024;
export const MAX_LAST_UPDATE_REASON = 256;
const OUTCOMES = ['installed', 'reverted'] as const;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's job.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function version(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 64) return undefined;
  try {
    return formatVersion(parseVersion(value));
  } catch {
    return undefined;
  }
}

/**
 * A LastUpdate from parsed JSON, or undefined when it is not one: versions that are not semantic,
 * an unknown outcome, a time that is not a date. The reason loses control characters and is cut
 * to MAX_LAST_UPDATE_REASON. The agent checks the file with it, and the proxy the field of a
 * description (the network's copy) the same way. Pure.
 */
export function checkLastUpdate(value: unknown): LastUpdate | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const raw = value as Record<string, unknown>;
  const from = version(raw.from);
  const to = version(raw.to);
  if (!from || !to) return undefined;
  if (typeof raw.outcome !== 'string' || !(OUTCOMES as readonly string[]).includes(raw.outcome)) return undefined;
  if (typeof raw.reason !== 'string' || typeof raw.at !== 'string' || raw.at.length > 40) return undefined;
  const at = Date.parse(raw.at);
  if (Number.isNaN(at)) return undefined;
  return {
    from,
    to,
    outcome: raw.outcome as LastUpdate['outcome'],
    reason: raw.reason.replace(UNPRINTABLE, ' ').trim().slice(0, MAX_LAST_UPDATE_REASON),
    at: new Date(at).toISOString(),
  };
}

/** Reads `<stateDir>/last-update.json`; undefined when absent, too large or not a record. */
export async function readLastUpdate(stateDir: string): Promise<LastUpdate | undefined> {
  let text: string;
  try {
    text = await readFile(join(stateDir, LAST_UPDATE_FILE), 'utf8');
  } catch {
    return undefined;
  }
  if (Buffer.byteLength(text) > MAX_LAST_UPDATE_BYTES) return undefined;
  try {
    return checkLastUpdate(JSON.parse(text));
  } catch {
    return undefined;
  }
}

/** Writes the record atomically (a reader sees the old one or the new one). */
export async function writeLastUpdate(stateDir: string, update: LastUpdate): Promise<void> {
  const checked = checkLastUpdate(update);
  if (!checked) throw new TypeError(`not a last-update record: ${JSON.stringify(update).slice(0, 200)}`);
  await writeFileAtomic(join(stateDir, LAST_UPDATE_FILE), `${JSON.stringify(checked)}\n`);
}
