/**
 * Strict PROXY protocol v1/v2 parsing and encoding (pure; haproxy's proxy-protocol.txt). The
 * multiplexer accepts a header only from trusted networks and sends one to an upstream on connect.
 */
import { ErrorCodes } from '../errors.js';
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from './address.js';
import { ProxyHeaderError, type ProxyAddress, type ProxyHeaderResult, type ProxyTlv } from './types.js';
import { encodeV1Line, parseProxyV1 } from './v1.js';
import { encodeV2, parseProxyV2, PP2_CMD_LOCAL, PP2_CMD_PROXY, PP2_FAM_INET6_STREAM, PP2_FAM_INET_STREAM, PP2_FAM_UNSPEC } from './v2.js';

export { ProxyHeaderError } from './types.js';
export type { ProxyAddress, ProxyHeader, ProxyHeaderResult, ProxyTlv } from './types.js';
export { encodeProxyHeaderV1Unknown, V1_MAX_LENGTH } from './v1.js';
export { PROXY_V2_SIGNATURE, PP2_TYPE } from './v2.js';

/**
 * Parses the PROXY header at the start of `buf`: 'need' (at least that many more bytes), 'done'
 * with the header and its length, or throws ProxyHeaderError — GATE_ERR_PROXY_HEADER_MISSING when
 * the bytes start with neither signature, GATE_ERR_PROXY_HEADER_MALFORMED otherwise.
 */
export function parseProxyHeader(buf: Uint8Array): ProxyHeaderResult {
  if (buf.length === 0) return { status: 'need', bytes: 15 }; // the shortest header, "PROXY UNKNOWN\r\n"
  // The first byte tells the versions apart: 'P' or '\r' (the v2 signature was built for that).
  if (buf[0] === 0x50) return parseProxyV1(buf);
  if (buf[0] === 0x0d) return parseProxyV2(buf);
  throw new ProxyHeaderError('no PROXY protocol header', ErrorCodes.PROXY_HEADER_MISSING);
}

interface Endpoints {
  family: 'IPv4' | 'IPv6';
  src: Uint8Array;
  dst: Uint8Array;
  srcPort: number;
  dstPort: number;
}

/** IPv4-mapped IPv6 (::ffff:a.b.c.d) of four IPv4 bytes. */
function mapped(v4: Uint8Array): Uint8Array {
  const out = new Uint8Array(16);
  out[10] = 0xff;
  out[11] = 0xff;
  out.set(v4, 12);
  return out;
}

function bytesOf(a: ProxyAddress, what: string): Uint8Array {
  const bytes = a.family === 'IPv4' ? parseIPv4(a.address) : a.family === 'IPv6' ? parseIPv6(a.address) : undefined;
  if (!bytes) throw new ProxyHeaderError(`cannot encode ${what} address "${a.address}" as ${String(a.family)}`);
  if (!Number.isInteger(a.port) || a.port < 0 || a.port > 65535) throw new ProxyHeaderError(`cannot encode ${what} port ${a.port}`);
  return bytes;
}

function endpoints(source: ProxyAddress, destination: ProxyAddress): Endpoints {
  let src = bytesOf(source, 'source');
  let dst = bytesOf(destination, 'destination');
  let family = source.family;
  if (source.family !== destination.family) {
    // Mixed families (a dual-stack listener): both as IPv6, IPv4 mapped — what HAProxy sends.
    if (src.length === 4) src = mapped(src);
    if (dst.length === 4) dst = mapped(dst);
    family = 'IPv6';
  }
  return { family, src, dst, srcPort: source.port, dstPort: destination.port };
}

/** "PROXY TCP4|TCP6 src dst srcport dstport\r\n" with canonical address text. */
export function encodeProxyHeaderV1(source: ProxyAddress, destination: ProxyAddress): Buffer {
  const e = endpoints(source, destination);
  const text = e.family === 'IPv4' ? formatIPv4 : formatIPv6;
  return encodeV1Line(e.family, text(e.src), text(e.dst), e.srcPort, e.dstPort);
}

export interface EncodeProxyV2Options {
  /** Append a PP2_TYPE_CRC32C TLV so the receiver can check the header (§2.2.5). */
  crc32c?: boolean;
}

/** A v2 PROXY/STREAM header for the endpoints, then the TLVs in order. */
export function encodeProxyHeaderV2(
  source: ProxyAddress,
  destination: ProxyAddress,
  tlvs: ProxyTlv[] = [],
  options: EncodeProxyV2Options = {},
): Buffer {
  const e = endpoints(source, destination);
  const block = new Uint8Array(e.family === 'IPv4' ? 12 : 36);
  block.set(e.src, 0);
  block.set(e.dst, e.src.length);
  const ports = e.src.length * 2;
  block[ports] = e.srcPort >> 8;
  block[ports + 1] = e.srcPort & 0xff;
  block[ports + 2] = e.dstPort >> 8;
  block[ports + 3] = e.dstPort & 0xff;
  const fam = e.family === 'IPv4' ? PP2_FAM_INET_STREAM : PP2_FAM_INET6_STREAM;
  return encodeV2(PP2_CMD_PROXY, fam, block, tlvs, options.crc32c === true);
}

/** A v2 LOCAL header (health checks from the proxy itself): the receiver keeps the real endpoints. */
export function encodeProxyHeaderV2Local(): Buffer {
  return encodeV2(PP2_CMD_LOCAL, PP2_FAM_UNSPEC, new Uint8Array(0), [], false);
}
