import { ErrorCodes, GateError } from '../errors.js';

/** A parsed Semantic Versioning 2.0.0 version. */
export interface SemVer {
  major: number;
  minor: number;
  patch: number;
  /** Dot-separated pre-release identifiers; numeric ones as numbers. Empty for a release. */
  prerelease: Array<string | number>;
  /** Build metadata identifiers (ignored for precedence, §10). */
  build: string[];
}

// §2 and §9: numbers without leading zeros; identifiers [0-9A-Za-z-], numeric ones without leading zeros.
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$/;

/**
 * Parses `1.2.3`, `v1.2.3-rc.1+build.5`: surrounding whitespace and one leading `v` (channels
 * serve `v1.2.3`) are stripped. Throws GATE_ERR_UPGRADE_VERSION_INVALID.
 */
export function parseVersion(text: string): SemVer {
  const trimmed = text.trim();
  const bare = trimmed.startsWith('v') ? trimmed.slice(1) : trimmed;
  const m = SEMVER.exec(bare);
  const numbers = m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [];
  if (!m || !numbers.every(Number.isSafeInteger)) {
    throw new GateError(ErrorCodes.UPGRADE_VERSION_INVALID, `${JSON.stringify(text.slice(0, 80))} is not a semantic version`);
  }
  const prerelease =
    m[4] === undefined ? [] : m[4].split('.').map((id) => (/^\d+$/.test(id) && Number.isSafeInteger(Number(id)) ? Number(id) : id));
  return { major: numbers[0]!, minor: numbers[1]!, patch: numbers[2]!, prerelease, build: m[5] === undefined ? [] : m[5].split('.') };
}

/** The version without a leading `v` and without build metadata: `1.2.3-rc.1`. */
export function formatVersion(v: SemVer): string {
  return `${v.major}.${v.minor}.${v.patch}${v.prerelease.length ? `-${v.prerelease.join('.')}` : ''}`;
}

function compareIdentifiers(a: string | number, b: string | number): number {
  // §11.4.1-3: numeric identifiers compare numerically and rank below alphanumeric ones, which
  // compare in ASCII order.
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'number') return -1;
  if (typeof b === 'number') return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Precedence per semver.org §11: major, minor, patch numerically; a pre-release ranks below its
 * release (1.0.0-rc.1 < 1.0.0); pre-releases compare identifier by identifier, a shorter set
 * ranking lower when all before are equal; build metadata is ignored (1.0.0+a == 1.0.0+b).
 * Returns -1, 0 or 1. Accepts strings (parsed, `v` stripped) or parsed versions.
 */
export function compareVersions(left: string | SemVer, right: string | SemVer): -1 | 0 | 1 {
  const a = typeof left === 'string' ? parseVersion(left) : left;
  const b = typeof right === 'string' ? parseVersion(right) : right;
  const sign = (n: number): -1 | 0 | 1 => (n < 0 ? -1 : n > 0 ? 1 : 0);
  for (const key of ['major', 'minor', 'patch'] as const) {
    if (a[key] !== b[key]) return sign(a[key] - b[key]);
  }
  if (a.prerelease.length === 0 || b.prerelease.length === 0) {
    return sign(b.prerelease.length - a.prerelease.length); // the release ranks higher (§11.3)
  }
  const n = Math.min(a.prerelease.length, b.prerelease.length);
  for (let i = 0; i < n; i++) {
    const c = compareIdentifiers(a.prerelease[i]!, b.prerelease[i]!);
    if (c !== 0) return sign(c);
  }
  return sign(a.prerelease.length - b.prerelease.length);
}
