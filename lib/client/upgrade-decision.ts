import { parseTarget, formatHostPort } from './target.js';

/** How long a detected answer (upgrade or not) is kept per proxy address. */
export const UPGRADE_DECISION_TTL_MS = 10 * 60_000;

/**
 * What `GATE_TLS_ROUTING_UPGRADE` says for `target` (pure): `true` / `1` / `yes` forces the
 * connection upgrade for every proxy address, `false` / `0` / `no` forbids it, a comma-separated
 * list of `host:port` forces it for those addresses only (the rest are detected). Unset, empty,
 * or a list not naming `target`: undefined, detect. Host names compare case-insensitively.
 */
export function forcedUpgrade(value: string | undefined, target: string): boolean | undefined {
  const text = value?.trim().toLowerCase() ?? '';
  if (text === '') return undefined;
  if (text === 'true' || text === '1' || text === 'yes') return true;
  if (text === 'false' || text === '0' || text === 'no') return false;
  const wanted = normalise(target);
  for (const entry of text.split(',')) {
    if (entry.trim() !== '' && normalise(entry.trim()) === wanted) return true;
  }
  return undefined;
}

function normalise(address: string): string {
  try {
    const { host, port } = parseTarget(address);
    return formatHostPort(host.toLowerCase(), port);
  } catch {
    return address.toLowerCase();
  }
}

/**
 * Detected answers per proxy address, for `ttlMs`: whether the path to it ends TLS before the
 * proxy (so TLS routing needs the upgrade). Bounded: past `maxEntries` the oldest answer goes.
 */
export class UpgradeDecisions {
  private readonly answers = new Map<string, { upgrade: boolean; until: number }>();

  constructor(
    private readonly ttlMs = UPGRADE_DECISION_TTL_MS,
    private readonly maxEntries = 1024,
    private readonly now: () => number = Date.now,
  ) {}

  get(target: string): boolean | undefined {
    const key = normalise(target);
    const answer = this.answers.get(key);
    if (!answer) return undefined;
    if (answer.until <= this.now()) {
      this.answers.delete(key);
      return undefined;
    }
    return answer.upgrade;
  }

  set(target: string, upgrade: boolean): void {
    const key = normalise(target);
    this.answers.delete(key);
    if (this.answers.size >= this.maxEntries) this.answers.delete(this.answers.keys().next().value!);
    this.answers.set(key, { upgrade, until: this.now() + this.ttlMs });
  }

  /** Forgets `target`'s answer (a path that changed: the next dial detects again). */
  forget(target: string): void {
    this.answers.delete(normalise(target));
  }
}

/** The process's answers, shared by every dialer (agent tunnels, joining, local proxies). */
export const upgradeDecisions = new UpgradeDecisions();
