/**
 * Postgres front-end first messages (protocol docs, "Message Formats"): none has a type byte; all
 * start with an int32 length (self included) and an int32 code. Eight bytes decide, and the first
 * byte alone rules most other protocols out (a plausible length starts with 0x00).
 */
import { NO, type GreetingResult } from './types.js';

interface Candidate {
  protocol: 'postgres-ssl' | 'postgres-gssenc' | 'postgres-cancel' | 'postgres-startup';
  minLength: number;
  maxLength: number;
  minCode: number;
  maxCode: number;
}

export const SSL_REQUEST_CODE = 80877103; // 1234 << 16 | 5679
export const GSSENC_REQUEST_CODE = 80877104; // 1234 << 16 | 5680
export const CANCEL_REQUEST_CODE = 80877102; // 1234 << 16 | 5678
export const PROTOCOL_3_0 = 196608; // 3 << 16

const CANDIDATES: readonly Candidate[] = [
  { protocol: 'postgres-ssl', minLength: 8, maxLength: 8, minCode: SSL_REQUEST_CODE, maxCode: SSL_REQUEST_CODE },
  { protocol: 'postgres-gssenc', minLength: 8, maxLength: 8, minCode: GSSENC_REQUEST_CODE, maxCode: GSSENC_REQUEST_CODE },
  // 16 bytes with protocol 3.0's 4-byte key; protocol 3.2 (PostgreSQL 18) allows keys up to 256 bytes.
  { protocol: 'postgres-cancel', minLength: 16, maxLength: 12 + 256, minCode: CANCEL_REQUEST_CODE, maxCode: CANCEL_REQUEST_CODE },
  // Major version 3, any minor (18 speaks 3.2 and negotiates down). postmaster.c refuses a length
  // over MAX_STARTUP_PACKET_LENGTH (10000) not counting the length word, and the parameter list
  // needs at least its terminating NUL: 9..10004 bytes.
  { protocol: 'postgres-startup', minLength: 9, maxLength: 10004, minCode: PROTOCOL_3_0, maxCode: PROTOCOL_3_0 + 0xffff },
];

/** Whether the big-endian int32 at `offset`, of which only the bytes present are known, can be in [min, max]. */
function possible(buf: Uint8Array, offset: number, min: number, max: number): boolean {
  const known = Math.max(0, Math.min(4, buf.length - offset));
  let lo = 0;
  for (let i = 0; i < known; i++) lo = lo * 256 + buf[offset + i]!;
  const scale = 256 ** (4 - known);
  lo *= scale;
  const hi = lo + scale - 1;
  return hi >= min && lo <= max;
}

function readUInt32(buf: Uint8Array, offset: number): number {
  return ((buf[offset]! << 24) >>> 0) + (buf[offset + 1]! << 16) + (buf[offset + 2]! << 8) + buf[offset + 3]!;
}

/** Any Postgres front-end first message; `protocol` tells which one, `length` its declared size. */
export function sniffPostgres(buf: Uint8Array): GreetingResult {
  let any = false;
  for (const c of CANDIDATES) {
    if (!possible(buf, 0, c.minLength, c.maxLength) || !possible(buf, 4, c.minCode, c.maxCode)) continue;
    if (buf.length >= 8) return { verdict: 'match', protocol: c.protocol, length: readUInt32(buf, 0) };
    any = true;
  }
  return any ? { verdict: 'need', bytes: 8 - buf.length } : NO;
}
