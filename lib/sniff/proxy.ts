import { ascii, sniffLiterals } from './prefix.js';
import type { Sniff } from './types.js';

/** haproxy proxy-protocol.txt §2.1: a v1 header starts with "PROXY" and a single space. */
const V1 = [ascii('PROXY ')];
/** §2.2: the v2 signature, chosen so that it cannot start any v1 or other text protocol. */
export const PROXY_V2_SIGNATURE = Uint8Array.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V2 = [PROXY_V2_SIGNATURE];

export function sniffProxyV1(buf: Uint8Array): Sniff {
  return sniffLiterals(buf, V1);
}

export function sniffProxyV2(buf: Uint8Array): Sniff {
  return sniffLiterals(buf, V2);
}
