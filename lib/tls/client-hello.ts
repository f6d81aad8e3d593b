// CONTRACT (implementation pending): pure, incremental TLS ClientHello parser.
import { GateError } from '../errors.js';

export interface ClientHello {
  /** server_name (host_name) lower-cased, or undefined when absent. An IP literal is rejected as malformed SNI? no: reported in `sniIsIp`, sni left undefined. */
  sni: string | undefined;
  /** ALPN protocol names in the client's preference order (empty when the extension is absent). */
  alpn: string[];
  /** legacy_version from the ClientHello body (e.g. 0x0303). */
  legacyVersion: number;
  /** supported_versions extension values in client order, GREASE removed (empty when absent). */
  supportedVersions: number[];
  /** True when the client offers encrypted_client_hello (0xfe0d) — outer SNI is then the public name. */
  echOffered: boolean;
  /** Extension type numbers in order, GREASE included (useful for fingerprints and logs). */
  extensionTypes: number[];
  /** Bytes of the handshake message (4-byte header + body). */
  handshakeLength: number;
  /** Bytes of TLS records, headers included, that carried the ClientHello. */
  recordBytes: number;
  /** How many TLS records carried it. */
  recordCount: number;
}

export interface ParseClientHelloOptions {
  /** Maximum handshake message size accepted (default 16384). */
  maxHandshakeBytes?: number;
}

export type ClientHelloResult =
  | { status: 'need'; bytes: number }
  | { status: 'done'; hello: ClientHello };

export class ClientHelloError extends GateError {}

export const DEFAULT_MAX_HANDSHAKE_BYTES = 16384;

export function parseClientHello(_buf: Uint8Array, _options?: ParseClientHelloOptions): ClientHelloResult {
  throw new Error('not implemented');
}
