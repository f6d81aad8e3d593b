// CONTRACT (implementation pending): strict PROXY protocol v1/v2 parsing and encoding (pure).
import { GateError } from '../errors.js';

export interface ProxyAddress {
  address: string;
  port: number;
  family: 'IPv4' | 'IPv6';
}

export interface ProxyHeader {
  version: 1 | 2;
  /** v2 LOCAL (health checks) or v1 UNKNOWN: no addresses; the connection's own addresses stand. */
  command: 'proxy' | 'local';
  /** 'tcp4' | 'tcp6' | 'unknown' (other families and UDP are rejected as unsupported). */
  transport: 'tcp4' | 'tcp6' | 'unknown';
  source?: ProxyAddress;
  destination?: ProxyAddress;
  /** v2 TLVs in order (type, raw value). */
  tlvs: Array<{ type: number; value: Buffer }>;
  /** Total header length in bytes. */
  length: number;
}

export type ProxyHeaderResult = { status: 'need'; bytes: number } | { status: 'done'; header: ProxyHeader };

export class ProxyHeaderError extends GateError {}

export declare function parseProxyHeader(buf: Uint8Array): ProxyHeaderResult;
export declare function encodeProxyHeaderV1(source: ProxyAddress, destination: ProxyAddress): Buffer;
export declare function encodeProxyHeaderV2(source: ProxyAddress, destination: ProxyAddress, tlvs?: Array<{ type: number; value: Buffer }>): Buffer;
