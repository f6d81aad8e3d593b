import { NO, type Sniff } from './types.js';

/**
 * A TLS handshake record header: content type 22, version major 3, minor 0..4 (SSL 3.0 to the
 * 0x0304 some stacks put in records; RFC 8446 §5.1 says 0x0301 or 0x0303 for a ClientHello).
 * Three bytes decide; the ClientHello parser then checks everything else.
 */
export function sniffTls(buf: Uint8Array): Sniff {
  if (buf.length === 0) return { verdict: 'need', bytes: 3 };
  if (buf[0] !== 0x16) return NO;
  if (buf.length === 1) return { verdict: 'need', bytes: 2 };
  if (buf[1] !== 0x03) return NO;
  if (buf.length === 2) return { verdict: 'need', bytes: 1 };
  return buf[2]! <= 0x04 ? { verdict: 'match' } : NO;
}
