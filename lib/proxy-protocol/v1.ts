/**
 * PROXY protocol version 1, the text form (haproxy proxy-protocol.txt §2.1):
 *   "PROXY" SP ("TCP4" | "TCP6") SP src SP dst SP srcport SP dstport CRLF   or   "PROXY UNKNOWN" ... CRLF
 * at most 107 bytes with the CRLF. Parsed strictly: single spaces, addresses of the declared family,
 * decimal ports 0..65535 without leading zeroes.
 */
import { ErrorCodes } from '../errors.js';
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from './address.js';
import { ProxyHeaderError, type ProxyAddress, type ProxyHeader, type ProxyHeaderResult } from './types.js';

export const V1_MAX_LENGTH = 107;
const V1_MIN_LENGTH = 15; // "PROXY UNKNOWN\r\n"
const PREFIX = 'PROXY ';
const PROTOCOLS = ['TCP4 ', 'TCP6 ', 'UNKNOWN'] as const;
const CR = 0x0d;
const LF = 0x0a;

function malformed(message: string): ProxyHeaderError {
  return new ProxyHeaderError(`malformed PROXY v1 header: ${message}`);
}

/** Parses a v1 header at the start of `buf` (the caller has seen it start with "P"). */
export function parseProxyV1(buf: Uint8Array): ProxyHeaderResult {
  for (let i = 0; i < PREFIX.length && i < buf.length; i++) {
    if (buf[i] !== PREFIX.charCodeAt(i)) throw new ProxyHeaderError('no PROXY protocol header', ErrorCodes.PROXY_HEADER_MISSING);
  }
  const limit = Math.min(buf.length, V1_MAX_LENGTH);
  let end = -1;
  for (let i = 0; i < limit; i++) {
    const c = buf[i]!;
    if (c === CR) {
      if (i + 1 === buf.length) break; // the LF may come next
      if (buf[i + 1] !== LF) throw malformed('CR not followed by LF');
      end = i;
      break;
    }
    // Printable ASCII only: the header is text, and UNKNOWN's ignored tail is still part of a line.
    if (c < 0x20 || c > 0x7e) throw malformed(`byte 0x${c.toString(16).padStart(2, '0')} at ${i}`);
  }
  if (end === -1) {
    if (buf.length >= V1_MAX_LENGTH) throw malformed(`no CRLF within ${V1_MAX_LENGTH} bytes`);
    checkPrefix(buf);
    const pendingCr = buf.length > 0 && buf[buf.length - 1] === CR;
    return { status: 'need', bytes: Math.max(pendingCr ? 1 : 2, V1_MIN_LENGTH - buf.length) };
  }
  if (end + 2 > V1_MAX_LENGTH) throw malformed(`longer than ${V1_MAX_LENGTH} bytes`);
  const line = Buffer.from(buf.buffer, buf.byteOffset, end).toString('latin1');
  return { status: 'done', header: parseLine(line, end + 2) };
}

/** Early refusal of an incomplete line that can no longer become a header. */
function checkPrefix(buf: Uint8Array): void {
  const text = Buffer.from(buf.buffer, buf.byteOffset, Math.min(buf.length, PREFIX.length + 7)).toString('latin1');
  const proto = text.slice(PREFIX.length);
  if (proto.length > 0 && !PROTOCOLS.some((p) => p.startsWith(proto.slice(0, p.length)))) {
    throw malformed(`unknown protocol "${proto}"`);
  }
}

function parseLine(line: string, length: number): ProxyHeader {
  if (line === 'PROXY UNKNOWN' || line.startsWith('PROXY UNKNOWN ')) {
    // §2.1: with UNKNOWN the receiver ignores the rest of the line and keeps the real endpoints.
    return { version: 1, command: 'local', transport: 'unknown', tlvs: [], length };
  }
  const parts = line.split(' ');
  if (parts.length !== 6) throw malformed(`expected 6 space-separated fields, got ${parts.length}`);
  const [, proto, src, dst, srcPort, dstPort] = parts as [string, string, string, string, string, string];
  let family: 'IPv4' | 'IPv6';
  let normalize: (text: string) => string | undefined;
  if (proto === 'TCP4') {
    family = 'IPv4';
    normalize = (t) => {
      const b = parseIPv4(t);
      return b && formatIPv4(b);
    };
  } else if (proto === 'TCP6') {
    family = 'IPv6';
    normalize = (t) => {
      const b = parseIPv6(t);
      return b && formatIPv6(b);
    };
  } else {
    throw malformed(`unknown protocol "${proto}"`);
  }
  const address = (text: string, port: string, what: string): ProxyAddress => {
    const a = normalize(text);
    if (a === undefined) throw malformed(`${what} address "${text}" is not ${family}`);
    return { address: a, port: parsePort(port, what), family };
  };
  return {
    version: 1,
    command: 'proxy',
    transport: family === 'IPv4' ? 'tcp4' : 'tcp6',
    source: address(src, srcPort, 'source'),
    destination: address(dst, dstPort, 'destination'),
    tlvs: [],
    length,
  };
}

function parsePort(text: string, what: string): number {
  // §2.1: decimal 0..65535, no leading zeroes (they could be read as octal).
  if (!/^(0|[1-9][0-9]{0,4})$/.test(text)) throw malformed(`${what} port "${text}"`);
  const port = Number(text);
  if (port > 65535) throw malformed(`${what} port ${port} > 65535`);
  return port;
}

/** "PROXY UNKNOWN\r\n": the connection's own endpoints stand (health checks, unknown families). */
export function encodeProxyHeaderV1Unknown(): Buffer {
  return Buffer.from('PROXY UNKNOWN\r\n', 'latin1');
}

export function encodeV1Line(family: 'IPv4' | 'IPv6', src: string, dst: string, srcPort: number, dstPort: number): Buffer {
  return Buffer.from(`PROXY ${family === 'IPv4' ? 'TCP4' : 'TCP6'} ${src} ${dst} ${srcPort} ${dstPort}\r\n`, 'latin1');
}
