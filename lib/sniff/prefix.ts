/**
 * Matching the start of a buffer against fixed byte strings, three-state: the shared core of the
 * SSH, HTTP and PROXY sniffers.
 */
import { NO, type Sniff } from './types.js';

export function ascii(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 0xff;
  return out;
}

/**
 * 'match' when `buf` starts with one of `literals` (reporting that literal's length when
 * `reportLength`), 'need' with the fewest bytes that could complete one while `buf` is a prefix of
 * some, else 'no'. No literal may be a prefix of another.
 */
export function sniffLiterals(buf: Uint8Array, literals: readonly Uint8Array[], reportLength = false): Sniff {
  let need = Infinity;
  for (const lit of literals) {
    const n = Math.min(lit.length, buf.length);
    let i = 0;
    while (i < n && buf[i] === lit[i]) i++;
    if (i < n) continue;
    if (n === lit.length) return reportLength ? { verdict: 'match', length: lit.length } : { verdict: 'match' };
    if (lit.length - n < need) need = lit.length - n;
  }
  return need === Infinity ? NO : { verdict: 'need', bytes: need };
}
