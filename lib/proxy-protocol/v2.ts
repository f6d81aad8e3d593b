/**
 * PROXY protocol version 2, the binary form (haproxy proxy-protocol.txt §2.2): the 12-byte
 * signature, ver_cmd, fam, a 16-bit length, then the address block and TLVs.
 */
import { ErrorCodes } from '../errors.js';
import { formatIPv4, formatIPv6 } from './address.js';
import { crc32c } from './crc32c.js';
import { ProxyHeaderError, type ProxyHeader, type ProxyHeaderResult, type ProxyTlv } from './types.js';

export const PROXY_V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
export const V2_HEADER_LENGTH = 16;

export const PP2_CMD_LOCAL = 0x0;
export const PP2_CMD_PROXY = 0x1;
export const PP2_FAM_INET_STREAM = 0x11;
export const PP2_FAM_INET6_STREAM = 0x21;
export const PP2_FAM_UNSPEC = 0x00;
const ADDRESS_BLOCK = { 1: 12, 2: 36, 3: 216 } as const; // INET, INET6, UNIX

/** TLV types from §2.2.x (only CRC32C is interpreted here; the rest are passed through). */
export const PP2_TYPE = {
  ALPN: 0x01,
  AUTHORITY: 0x02,
  CRC32C: 0x03,
  NOOP: 0x04,
  UNIQUE_ID: 0x05,
  SSL: 0x20,
  NETNS: 0x30,
} as const;

function malformed(message: string): ProxyHeaderError {
  return new ProxyHeaderError(`malformed PROXY v2 header: ${message}`, ErrorCodes.PROXY_HEADER_MALFORMED);
}

/** Parses a v2 header at the start of `buf` (the caller has seen it start with "\r"). */
export function parseProxyV2(buf: Uint8Array): ProxyHeaderResult {
  const n = Math.min(buf.length, PROXY_V2_SIGNATURE.length);
  for (let i = 0; i < n; i++) {
    if (buf[i] !== PROXY_V2_SIGNATURE[i]) throw new ProxyHeaderError('not a PROXY v2 signature', ErrorCodes.PROXY_HEADER_MISSING);
  }
  if (buf.length > 12) {
    const verCmd = buf[12]!;
    if (verCmd >> 4 !== 2) throw malformed(`version ${verCmd >> 4}`);
    if ((verCmd & 0xf) > PP2_CMD_PROXY) throw malformed(`command ${verCmd & 0xf}`);
  }
  if (buf.length < V2_HEADER_LENGTH) return { status: 'need', bytes: V2_HEADER_LENGTH - buf.length };
  const command = buf[12]! & 0xf;
  const fam = buf[13]!;
  const blockLength = (buf[14]! << 8) | buf[15]!;
  const length = V2_HEADER_LENGTH + blockLength;

  const family = fam >> 4;
  const transport = fam & 0xf;
  // §2.2: LOCAL ignores the family entirely, so it only has to be well-formed for PROXY.
  if (command === PP2_CMD_PROXY) {
    if (family > 3 || transport > 2) throw malformed(`address family/transport byte 0x${fam.toString(16).padStart(2, '0')}`);
    if ((family === 0) !== (transport === 0)) throw malformed(`address family/transport byte 0x${fam.toString(16).padStart(2, '0')}`);
    if (family === 3) throw malformed('unsupported: AF_UNIX addresses');
    if (transport === 2) throw malformed('unsupported: UDP (DGRAM) transport');
    const need = family === 0 ? 0 : ADDRESS_BLOCK[family as 1 | 2];
    if (blockLength < need) throw malformed(`address block of ${blockLength} bytes, ${need} needed`);
  }
  if (buf.length < length) return { status: 'need', bytes: length - buf.length };

  if (command === PP2_CMD_LOCAL || family === 0) {
    // LOCAL: "discard the protocol block including the family"; AF_UNSPEC: ignore the addresses.
    return {
      status: 'done',
      header: { version: 2, command: command === PP2_CMD_LOCAL ? 'local' : 'proxy', transport: 'unknown', tlvs: [], length },
    };
  }
  const header: ProxyHeader =
    family === 1
      ? {
          version: 2,
          command: 'proxy',
          transport: 'tcp4',
          source: { address: formatIPv4(buf, 16), port: (buf[24]! << 8) | buf[25]!, family: 'IPv4' },
          destination: { address: formatIPv4(buf, 20), port: (buf[26]! << 8) | buf[27]!, family: 'IPv4' },
          tlvs: [],
          length,
        }
      : {
          version: 2,
          command: 'proxy',
          transport: 'tcp6',
          source: { address: formatIPv6(buf, 16), port: (buf[48]! << 8) | buf[49]!, family: 'IPv6' },
          destination: { address: formatIPv6(buf, 32), port: (buf[50]! << 8) | buf[51]!, family: 'IPv6' },
          tlvs: [],
          length,
        };
  header.tlvs = parseTlvs(buf, V2_HEADER_LENGTH + ADDRESS_BLOCK[family as 1 | 2], length);
  return { status: 'done', header };
}

/** TLVs fill the rest of the header exactly (§2.2.1); a CRC32C TLV must check out (§2.2.5). */
function parseTlvs(buf: Uint8Array, start: number, end: number): ProxyTlv[] {
  const tlvs: ProxyTlv[] = [];
  let p = start;
  while (p < end) {
    if (end - p < 3) throw malformed(`${end - p} stray bytes after the TLVs`);
    const type = buf[p]!;
    const len = (buf[p + 1]! << 8) | buf[p + 2]!;
    const valueStart = p + 3;
    if (valueStart + len > end) throw malformed(`TLV 0x${type.toString(16)} of ${len} bytes overruns the header`);
    if (type === PP2_TYPE.CRC32C) {
      if (len !== 4) throw malformed(`CRC32C TLV of ${len} bytes`);
      const expected = ((buf[valueStart]! << 24) >>> 0) + (buf[valueStart + 1]! << 16) + (buf[valueStart + 2]! << 8) + buf[valueStart + 3]!;
      let crc = crc32c(buf.subarray(0, valueStart));
      crc = crc32c(ZERO4, crc);
      crc = crc32c(buf.subarray(valueStart + 4, end), crc);
      if (crc !== expected) throw malformed('CRC32C mismatch');
    }
    tlvs.push({ type, value: Buffer.from(buf.subarray(valueStart, valueStart + len)) });
    p = valueStart + len;
  }
  return tlvs;
}

const ZERO4 = new Uint8Array(4);

/** The header bytes, with a CRC32C TLV filled in when one is present with a zero value. */
export function encodeV2(command: number, fam: number, addressBlock: Uint8Array, tlvs: ProxyTlv[], withCrc: boolean): Buffer {
  const tlvBytes = tlvs.reduce((sum, t) => sum + 3 + t.value.length, 0) + (withCrc ? 7 : 0);
  const blockLength = addressBlock.length + tlvBytes;
  if (blockLength > 0xffff) throw new ProxyHeaderError(`cannot encode a PROXY v2 header of ${blockLength} bytes`);
  const out = Buffer.alloc(V2_HEADER_LENGTH + blockLength);
  PROXY_V2_SIGNATURE.copy(out, 0);
  out[12] = 0x20 | command;
  out[13] = fam;
  out.writeUInt16BE(blockLength, 14);
  out.set(addressBlock, 16);
  let p = 16 + addressBlock.length;
  for (const t of tlvs) {
    if (!Number.isInteger(t.type) || t.type < 0 || t.type > 255) throw new ProxyHeaderError(`TLV type ${t.type}`);
    out[p] = t.type;
    out.writeUInt16BE(t.value.length, p + 1);
    out.set(t.value, p + 3);
    p += 3 + t.value.length;
  }
  if (withCrc) {
    out[p] = PP2_TYPE.CRC32C;
    out.writeUInt16BE(4, p + 1);
    out.writeUInt32BE(crc32c(out), p + 3); // computed while the value is still zero
  }
  return out;
}
