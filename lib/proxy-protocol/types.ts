import { ErrorCodes, GateError, type ErrorCode } from '../errors.js';

export interface ProxyAddress {
  address: string;
  port: number;
  family: 'IPv4' | 'IPv6';
}

export interface ProxyTlv {
  type: number;
  value: Buffer;
}

export interface ProxyHeader {
  version: 1 | 2;
  /**
   * 'local': v2 LOCAL (health checks) or v1 UNKNOWN — no addresses, the connection's own addresses
   * stand. 'proxy': a relayed connection; v2 AF_UNSPEC also has no addresses (transport 'unknown').
   */
  command: 'proxy' | 'local';
  /** 'tcp4' | 'tcp6' | 'unknown' (other families and UDP are rejected as unsupported). */
  transport: 'tcp4' | 'tcp6' | 'unknown';
  /** Present exactly when transport is 'tcp4' or 'tcp6'. */
  source?: ProxyAddress;
  destination?: ProxyAddress;
  /** v2 TLVs in order (type, raw value, copied). Empty for v1, LOCAL and AF_UNSPEC. */
  tlvs: ProxyTlv[];
  /** Total header length in bytes: the caller's payload starts right after it. */
  length: number;
}

export type ProxyHeaderResult = { status: 'need'; bytes: number } | { status: 'done'; header: ProxyHeader };

/**
 * A bad PROXY header: GATE_ERR_PROXY_HEADER_MALFORMED for a broken or unsupported header,
 * GATE_ERR_PROXY_HEADER_MISSING when the bytes do not start with either signature at all.
 */
export class ProxyHeaderError extends GateError {
  override readonly name = 'ProxyHeaderError';
  constructor(message: string, code: ErrorCode = ErrorCodes.PROXY_HEADER_MALFORMED) {
    super(code, message);
  }
}
