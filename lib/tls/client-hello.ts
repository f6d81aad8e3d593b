/**
 * Pure, incremental TLS ClientHello parser. It only looks at bytes: the caller keeps everything
 * received so far in one buffer (starting at the first record header) and calls again after every
 * read until the answer is 'done' or it throws.
 *
 * Why reassembly matters: a post-quantum (X25519MLKEM768) ClientHello is ~1.8 KB and often arrives
 * in two TCP segments, and RFC 8446 §5.1 lets a client fragment one handshake message over several
 * records (down to 1-byte records). Routers that look at the first record only (HAProxy, sslh,
 * Go's tcpproxy) misroute such clients; this parser handles both.
 *
 * Why so strict: routing must fail closed. A hello we cannot read completely and exactly must
 * never fall through to a permissive default route (Traefik CVE-2026-32305: an empty SNI selected a
 * default TLS config and skipped mTLS).
 */
import { isIPv4, isIPv6 } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';

export interface ClientHello {
  /**
   * server_name (host_name) lower-cased, or undefined when absent. An IP literal is not a valid
   * SNI (RFC 6066 §3): it leaves `sni` undefined and sets `sniIsIpLiteral`.
   */
  sni: string | undefined;
  /** True when the client sent an IP literal as server_name (then `sni` is undefined). */
  sniIsIpLiteral: boolean;
  /** ALPN protocol names in the client's preference order (empty when the extension is absent). */
  alpn: string[];
  /** legacy_version from the ClientHello body (e.g. 0x0303). */
  legacyVersion: number;
  /** supported_versions extension values in client order, GREASE removed (empty when absent). */
  supportedVersions: number[];
  /**
   * True when the client sends encrypted_client_hello (0xfe0d) — outer SNI is then the public name.
   * Chromium sends a GREASE ECH extension when it has no ECH config; it cannot be told apart here.
   */
  echOffered: boolean;
  /** Extension type numbers in order, GREASE included (useful for fingerprints and logs). */
  extensionTypes: number[];
  /** Bytes of the handshake message (4-byte header + body). */
  handshakeLength: number;
  /** Bytes of TLS records, headers included, that carried the ClientHello (a prefix of the input). */
  recordBytes: number;
  /** How many TLS records carried it. */
  recordCount: number;
}

export interface ParseClientHelloOptions {
  /** Maximum handshake message size accepted, 4-byte header included (default 16384). */
  maxHandshakeBytes?: number;
}

export type ClientHelloResult = { status: 'need'; bytes: number } | { status: 'done'; hello: ClientHello };

/** Raised for input that is not a TLS ClientHello, or not an acceptable one. */
export class ClientHelloError extends GateError {
  override readonly name = 'ClientHelloError';
}

export const DEFAULT_MAX_HANDSHAKE_BYTES = 16384;

const RECORD_HEADER = 5;
const HANDSHAKE_HEADER = 4;
const CONTENT_HANDSHAKE = 22;
const HANDSHAKE_CLIENT_HELLO = 1;
/** RFC 8446 §5.1: a TLSPlaintext fragment MUST NOT exceed 2^14 bytes. */
const MAX_RECORD_FRAGMENT = 16384;

const EXT_SERVER_NAME = 0x0000;
const EXT_ALPN = 0x0010;
const EXT_SUPPORTED_VERSIONS = 0x002b;
const EXT_PRE_SHARED_KEY = 0x0029;
const EXT_ECH = 0xfe0d;
/** OpenSSL's TLSEXT_MAXLEN_host_name: longer names are refused by the upstream anyway. */
const MAX_HOST_NAME = 255;

function malformed(message: string): ClientHelloError {
  return new ClientHelloError(ErrorCodes.HELLO_MALFORMED, `malformed ClientHello: ${message}`);
}

/** GREASE code points (RFC 8701): 0x0a0a, 0x1a1a, ... 0xfafa. */
export function isGrease(value: number): boolean {
  return (value & 0x0f0f) === 0x0a0a && value >> 8 === (value & 0xff);
}

/**
 * Parse the ClientHello at the start of `buf`. Returns how many more bytes are needed at least, or
 * the parsed hello. Throws only ClientHelloError: GATE_ERR_NOT_TLS when the first record is not a
 * TLS handshake record, GATE_ERR_HELLO_TOO_LARGE as soon as the handshake header announces more
 * than the cap, GATE_ERR_HELLO_MALFORMED for anything else wrong. Bytes after the records that
 * carry the hello are ignored (they belong to the next flight, e.g. early data).
 */
export function parseClientHello(input: Uint8Array, options?: ParseClientHelloOptions): ClientHelloResult {
  const max = options?.maxHandshakeBytes ?? DEFAULT_MAX_HANDSHAKE_BYTES;
  // A Buffer view of the same bytes (no copy): names are decoded with Buffer's latin1 slicing.
  const buf = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const len = buf.length;

  // Walk record headers. Only headers are read here, so calling again on a grown buffer is cheap.
  let pos = 0;
  let records = 0;
  let hsSeen = 0; // handshake bytes available in the records walked so far
  let hsTotal = -1; // handshake message length (header included), once its 4 header bytes are known
  let firstFragment = 0; // offset of the first record's fragment (for the no-copy single-record case)
  let headerBytes = 0; // handshake header bytes collected across records (may straddle records)
  let bodyLength = 0;
  for (;;) {
    // --- record header ---
    const avail = len - pos;
    if (avail > 0) checkRecordType(buf[pos]!, records);
    if (avail > 1 && buf[pos + 1] !== 0x03) throw badVersion(records);
    if (avail > 2 && buf[pos + 2]! > 0x04) throw badVersion(records);
    if (avail < RECORD_HEADER) {
      // At least: the rest of this header, then the handshake bytes still known to be missing.
      return need(RECORD_HEADER - avail + (hsTotal < 0 ? HANDSHAKE_HEADER - headerBytes : hsTotal - hsSeen));
    }
    const fragLen = (buf[pos + 3]! << 8) | buf[pos + 4]!;
    // RFC 8446 §5.1: zero-length handshake fragments MUST NOT be sent; longer than 2^14 is an overflow.
    if (fragLen === 0) throw malformed(`zero-length handshake record #${records + 1}`);
    if (fragLen > MAX_RECORD_FRAGMENT) throw malformed(`record #${records + 1} of ${fragLen} bytes exceeds 2^14`);
    const fragStart = pos + RECORD_HEADER;
    if (records === 0) firstFragment = fragStart;
    records++;

    // --- handshake header (may straddle records) ---
    let used = 0;
    while (headerBytes < HANDSHAKE_HEADER && used < fragLen && fragStart + used < len) {
      const b = buf[fragStart + used]!;
      if (headerBytes === 0) {
        if (b !== HANDSHAKE_CLIENT_HELLO) throw malformed(`handshake type ${b} is not client_hello (1)`);
      } else {
        bodyLength = (bodyLength << 8) | b;
      }
      headerBytes++;
      used++;
    }
    if (headerBytes === HANDSHAKE_HEADER && hsTotal < 0) {
      hsTotal = HANDSHAKE_HEADER + bodyLength;
      if (hsTotal > max) {
        throw new ClientHelloError(ErrorCodes.HELLO_TOO_LARGE, `ClientHello of ${hsTotal} bytes exceeds the ${max}-byte cap`);
      }
    }
    if (hsTotal < 0) {
      // Header still incomplete: this record must be fully consumed by header bytes so far.
      if (fragStart + fragLen > len) {
        // Only header bytes were missing; if this record cannot hold them all, another record must.
        const spill = HANDSHAKE_HEADER - headerBytes - (fragLen - used);
        return need(fragStart + fragLen - len + (spill > 0 ? RECORD_HEADER + spill : 0));
      }
      hsSeen += fragLen;
      pos = fragStart + fragLen;
      continue;
    }
    const remainingBefore = hsTotal - hsSeen;
    // The record that carries the hello's last byte must end with it: after a ClientHello the client
    // sends no other handshake message under the same (null) keys, and RFC 8446 §5.1 forbids a
    // handshake message to span a key change, so trailing bytes can only be garbage.
    if (fragLen > remainingBefore) {
      throw malformed(`record #${records} carries ${fragLen - remainingBefore} bytes past the ClientHello`);
    }
    const fragEnd = fragStart + fragLen;
    if (fragEnd > len) {
      const rest = remainingBefore - fragLen;
      return need(fragEnd - len + (rest > 0 ? RECORD_HEADER + rest : 0));
    }
    hsSeen += fragLen;
    pos = fragEnd;
    if (hsSeen === hsTotal) break;
  }

  // --- whole message available: parse the body ---
  let msg: Buffer;
  if (records === 1) {
    msg = buf.subarray(firstFragment, firstFragment + hsTotal); // no copy for the common case
  } else {
    msg = Buffer.allocUnsafe(hsTotal);
    let p = 0;
    let out = 0;
    while (out < hsTotal) {
      const fragLen = (buf[p + 3]! << 8) | buf[p + 4]!;
      msg.set(buf.subarray(p + RECORD_HEADER, p + RECORD_HEADER + fragLen), out);
      out += fragLen;
      p += RECORD_HEADER + fragLen;
    }
  }
  const hello = parseBody(msg, HANDSHAKE_HEADER, hsTotal);
  hello.handshakeLength = hsTotal;
  hello.recordBytes = pos;
  hello.recordCount = records;
  return { status: 'done', hello };
}

/** Every caller passes at least 1: each branch still misses a byte of the current record. */
function need(bytes: number): ClientHelloResult {
  return { status: 'need', bytes };
}

function checkRecordType(type: number, recordsBefore: number): void {
  if (type === CONTENT_HANDSHAKE) return;
  if (recordsBefore === 0) {
    throw new ClientHelloError(ErrorCodes.NOT_TLS, `not a TLS handshake record (first byte 0x${hex(type, 2)})`);
  }
  // RFC 8446 §5.1: handshake messages MUST NOT be interleaved with other record types.
  throw malformed(`record #${recordsBefore + 1} has content type ${type} inside the ClientHello`);
}

function badVersion(recordsBefore: number): ClientHelloError {
  const message = `record #${recordsBefore + 1} has no TLS record version 0x0300..0x0304`;
  return recordsBefore === 0 ? new ClientHelloError(ErrorCodes.NOT_TLS, message) : malformed(message);
}

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

/** Parses the ClientHello body msg[start, end) (RFC 8446 §4.1.2; RFC 5246 §7.4.1.2 for TLS 1.2). */
function parseBody(msg: Buffer, start: number, end: number): ClientHello {
  let p = start;
  const u8 = (what: string): number => {
    if (p + 1 > end) throw malformed(`truncated at ${what}`);
    return msg[p++]!;
  };
  const u16 = (what: string): number => {
    if (p + 2 > end) throw malformed(`truncated at ${what}`);
    const v = (msg[p]! << 8) | msg[p + 1]!;
    p += 2;
    return v;
  };
  const skip = (n: number, what: string): void => {
    if (p + n > end) throw malformed(`${what} of ${n} bytes overruns the message`);
    p += n;
  };

  const legacyVersion = u16('legacy_version');
  if (legacyVersion >> 8 !== 0x03) throw malformed(`legacy_version 0x${hex(legacyVersion, 4)}`);
  skip(32, 'random');
  const sessionIdLength = u8('session id length');
  if (sessionIdLength > 32) throw malformed(`session id of ${sessionIdLength} bytes (max 32)`);
  skip(sessionIdLength, 'session id');
  const suitesLength = u16('cipher_suites length');
  if (suitesLength === 0 || suitesLength % 2 !== 0) throw malformed(`cipher_suites length ${suitesLength}`);
  skip(suitesLength, 'cipher_suites');
  const compressionLength = u8('compression_methods length');
  if (compressionLength === 0) throw malformed('empty compression_methods');
  skip(compressionLength, 'compression_methods');

  const hello: ClientHello = {
    sni: undefined,
    sniIsIpLiteral: false,
    alpn: [],
    legacyVersion,
    supportedVersions: [],
    echOffered: false,
    extensionTypes: [],
    handshakeLength: 0,
    recordBytes: 0,
    recordCount: 0,
  };
  // RFC 5246 §7.4.1.2: a TLS 1.2 hello may end right after compression_methods (no extensions).
  if (p === end) return hello;

  const extensionsLength = u16('extensions length');
  if (p + extensionsLength !== end) {
    throw malformed(`extensions block of ${extensionsLength} bytes does not fill the message (${end - p} left)`);
  }
  try {
    while (p < end) {
      const type = u16('extension type');
      const extLength = u16('extension length');
      const extStart = p;
      // (No message string on the way: this runs for every extension of every hello.)
      if (p + extLength > end) throw malformed(`extension 0x${hex(type, 4)} of ${extLength} bytes overruns the message`);
      p += extLength;
      // RFC 8446 §4.2: there MUST NOT be more than one extension of the same type.
      if (seenExtension(type)) throw malformed(`duplicate extension 0x${hex(type, 4)}`);
      hello.extensionTypes.push(type);
      switch (type) {
        case EXT_SERVER_NAME:
          parseServerName(msg, extStart, p, hello);
          break;
        case EXT_ALPN:
          hello.alpn = parseAlpn(msg, extStart, p);
          break;
        case EXT_SUPPORTED_VERSIONS:
          hello.supportedVersions = parseSupportedVersions(msg, extStart, p);
          break;
        case EXT_ECH:
          hello.echOffered = true;
          break;
        case EXT_PRE_SHARED_KEY:
          // RFC 8446 §4.2.11: pre_shared_key MUST be the last extension in the ClientHello.
          if (p !== end) throw malformed('pre_shared_key is not the last extension');
          break;
        default:
          break; // unknown and GREASE extensions are tolerated (RFC 8446 §4.1.2, RFC 8701)
      }
    }
  } finally {
    for (const type of hello.extensionTypes) forgetExtension(type);
  }
  return hello;
}

/**
 * Extension types seen in the hello being parsed, one bit per type: a duplicate check with no
 * allocation per hello and linear in the number of extensions (a 16 KiB hello may carry 4,096).
 * Parsing is synchronous, so one table serves every call; parseBody clears its bits when done.
 */
const seenExtensions = new Uint8Array(65536 / 8);

function seenExtension(type: number): boolean {
  const bit = 1 << (type & 7);
  const seen = (seenExtensions[type >>> 3]! & bit) !== 0;
  seenExtensions[type >>> 3]! |= bit;
  return seen;
}

function forgetExtension(type: number): void {
  seenExtensions[type >>> 3]! &= ~(1 << (type & 7));
}

/**
 * RFC 6066 §3 server_name. Like OpenSSL (tls_parse_ctos_server_name) we accept exactly one entry of
 * type host_name: other name types were never deployed and the RFC allows one name per type.
 */
function parseServerName(msg: Buffer, start: number, end: number, hello: ClientHello): void {
  if (end - start < 2) throw malformed('server_name extension too short');
  const listLength = (msg[start]! << 8) | msg[start + 1]!;
  if (start + 2 + listLength !== end) throw malformed('server_name list length does not match the extension');
  if (listLength < 3) throw malformed('server_name list too short');
  const nameType = msg[start + 2]!;
  if (nameType !== 0) throw malformed(`server_name type ${nameType} is not host_name (0)`);
  const nameLength = (msg[start + 3]! << 8) | msg[start + 4]!;
  const nameStart = start + 5;
  if (nameStart + nameLength !== end) throw malformed('server_name must hold exactly one host_name');
  if (nameLength === 0) throw malformed('empty host_name');
  if (nameLength > MAX_HOST_NAME) throw malformed(`host_name of ${nameLength} bytes`);

  // Check each byte: LDH letters, digits, '-', '_' and '.', plus ':' only to recognise an IPv6
  // literal. The name is decoded once at the end, no string per byte.
  let colon = false;
  let previousDot = true; // a leading dot is an empty label
  let upper = false;
  for (let i = nameStart; i < end; i++) {
    let c = msg[i]!;
    if (c >= 0x41 && c <= 0x5a) c |= 0x20;
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f || c === 0x2e || c === 0x3a;
    if (!ok) throw malformed(`host_name byte 0x${hex(c, 2)} is not a host name character`);
    if (c === 0x3a) colon = true;
    if (c === 0x2e) {
      // RFC 6066 §3: no trailing dot; empty labels are not host names either.
      if (previousDot) throw malformed('host_name has an empty label');
      previousDot = true;
    } else {
      previousDot = false;
    }
    if (c !== msg[i]) upper = true;
  }
  // Checked to be ASCII: latin1 decoding is exact, and lower-casing needs no locale.
  const raw = msg.toString('latin1', nameStart, end);
  const codes = upper ? raw.toLowerCase() : raw;
  if (previousDot && !colon) throw malformed('host_name ends with a dot');
  if (colon) {
    if (!isIPv6(codes)) throw malformed('host_name contains ":"');
    hello.sniIsIpLiteral = true;
    return;
  }
  if (isIPv4(codes)) {
    hello.sniIsIpLiteral = true;
    return;
  }
  hello.sni = codes;
}

/** RFC 7301 §3.1: ProtocolNameList protocol_name_list<2..2^16-1>; ProtocolName <1..2^8-1>. */
function parseAlpn(msg: Buffer, start: number, end: number): string[] {
  if (end - start < 2) throw malformed('ALPN extension too short');
  const listLength = (msg[start]! << 8) | msg[start + 1]!;
  if (start + 2 + listLength !== end) throw malformed('ALPN list length does not match the extension');
  if (listLength === 0) throw malformed('empty ALPN list');
  const names: string[] = [];
  let p = start + 2;
  while (p < end) {
    const n = msg[p]!;
    if (n === 0) throw malformed('empty ALPN protocol name');
    if (p + 1 + n > end) throw malformed('ALPN protocol name overruns the list');
    // latin1 keeps every byte distinct: routes compare exact protocol names.
    names.push(msg.toString('latin1', p + 1, p + 1 + n));
    p += 1 + n;
  }
  return names;
}

/** RFC 8446 §4.2.1: ProtocolVersion versions<2..254> in a ClientHello. */
function parseSupportedVersions(msg: Uint8Array, start: number, end: number): number[] {
  if (end - start < 1) throw malformed('supported_versions extension too short');
  const n = msg[start]!;
  if (start + 1 + n !== end) throw malformed('supported_versions length does not match the extension');
  if (n < 2 || n % 2 !== 0) throw malformed(`supported_versions list of ${n} bytes`);
  const versions: number[] = [];
  for (let p = start + 1; p < end; p += 2) {
    const v = (msg[p]! << 8) | msg[p + 1]!;
    if (!isGrease(v)) versions.push(v);
  }
  return versions;
}
