import { isIP } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import type { MultiplexerSettings } from './types.js';

/** The multiplexer's defaults, in one table (the proxy's configuration reads them from here too). */
export const MUX_DEFAULTS = {
  /** One deadline for the whole detection phase: long enough for a slow client's handshake on a bad link. */
  detectTimeoutMs: 10_000,
  /** 0: routed connections have no idle timeout unless asked for. */
  idleTimeoutMs: 0,
  /** 0: no fixed per-source cap (the budget's fair share applies under pressure regardless). */
  maxConnectionsPerSource: 0,
  /** A post-quantum ClientHello is ~1.8 KB; 16 KiB leaves room for many extensions and no more. */
  maxHelloBytes: 16_384,
} as const;

/** Settings after `normalizeSettings`: every value checked, every default filled in. */
export interface NormalizedSettings {
  detectTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnectionsPerSource: number;
  maxHelloBytes: number;
  /** PROXY-protocol trusted sources, or undefined when headers are refused (mode off). */
  trusted: readonly string[] | undefined;
}

/** Timers beyond this fire at once in Node (TIMEOUT_MAX): a bigger deadline would be none at all. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function check(ok: boolean, name: string, value: unknown, expected: string): void {
  if (!ok) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `${name}: expected ${expected}, got ${JSON.stringify(value) ?? String(value)}`);
}

function wholeNumber(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  check(Number.isSafeInteger(value) && value >= min && value <= max, name, value, `a whole number from ${min} to ${max}`);
  return value;
}

/** A CIDR (`10.0.0.0/8`, `fd00::/8`) or a single address, as the PROXY-protocol trust list takes them. */
function validTrustEntry(entry: unknown): boolean {
  if (typeof entry !== 'string') return false;
  const [address = '', bits, extra] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  if (bits === undefined) return true;
  const n = Number(bits);
  return /^\d{1,3}$/.test(bits) && n <= (family === 4 ? 32 : 128);
}

/**
 * Checks every setting a multiplexer takes for new connections and fills in the defaults: one
 * place, so the constructor and `setOptions` cannot disagree, and a bad value (NaN, a negative
 * deadline, a malformed trusted network) is GATE_ERR_INVALID_ARGUMENT naming the option instead
 * of a deadline that never fires. The budget's own options (cap, shares) are checked by the budget.
 */
export function normalizeSettings(options: MultiplexerSettings): NormalizedSettings {
  const detectTimeoutMs = wholeNumber('detectTimeoutMs', options.detectTimeoutMs, MUX_DEFAULTS.detectTimeoutMs, 1, MAX_TIMER_MS);
  const idleTimeoutMs = wholeNumber('idleTimeoutMs', options.idleTimeoutMs, MUX_DEFAULTS.idleTimeoutMs, 0, MAX_TIMER_MS);
  const maxConnectionsPerSource = wholeNumber(
    'maxConnectionsPerSource',
    options.maxConnectionsPerSource,
    MUX_DEFAULTS.maxConnectionsPerSource,
    0,
    Number.MAX_SAFE_INTEGER,
  );
  // Below a TLS record header plus a minimal hello nothing could be routed; above 1 MiB the cap bounds nothing.
  const maxHelloBytes = wholeNumber('maxHelloBytes', options.maxHelloBytes, MUX_DEFAULTS.maxHelloBytes, 64, 1 << 20);
  wholeNumber('maxConnections', options.maxConnections, 0, 0, Number.MAX_SAFE_INTEGER);
  const pp = options.proxyProtocol ?? { mode: 'off' };
  check(pp.mode === 'off' || pp.mode === 'on', 'proxyProtocol.mode', pp.mode, "'on' or 'off'");
  let trusted: readonly string[] | undefined;
  if (pp.mode === 'on') {
    check(Array.isArray(pp.trusted), 'proxyProtocol.trusted', pp.trusted, 'a list of CIDRs or addresses');
    const bad = pp.trusted.find((entry) => !validTrustEntry(entry));
    check(bad === undefined, 'proxyProtocol.trusted', bad, 'a CIDR (10.0.0.0/8) or an IP address');
    trusted = pp.trusted;
  }
  return { detectTimeoutMs, idleTimeoutMs, maxConnectionsPerSource, maxHelloBytes, trusted };
}
