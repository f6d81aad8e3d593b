/**
 * TLS alert records sent before any handshake: an unmatched or unreadable ClientHello gets a fatal
 * alert (so the client reports "unrecognized name" instead of a bare connection reset), then close.
 */
import { ErrorCodes, GateError } from '../errors.js';

/** AlertDescription values (RFC 8446 §6, RFC 7301 §3.2 for no_application_protocol). */
export const TlsAlert = {
  handshakeFailure: 40,
  decodeError: 50,
  internalError: 80,
  unrecognizedName: 112,
  noApplicationProtocol: 120,
} as const;

export const ALERT_HANDSHAKE_FAILURE = TlsAlert.handshakeFailure;
export const ALERT_DECODE_ERROR = TlsAlert.decodeError;
export const ALERT_INTERNAL_ERROR = TlsAlert.internalError;
export const ALERT_UNRECOGNIZED_NAME = TlsAlert.unrecognizedName;
export const ALERT_NO_APPLICATION_PROTOCOL = TlsAlert.noApplicationProtocol;

const CONTENT_ALERT = 21;
const LEVEL_FATAL = 2;

/**
 * A plaintext fatal alert record: type 21, legacy version 0x0303 (RFC 8446 §5.1: every record but
 * the initial ClientHello uses 0x0303, and TLS 1.0-1.2 clients accept it), length 2, level fatal.
 */
export function tlsAlertRecord(description: number): Buffer {
  if (!Number.isInteger(description) || description < 0 || description > 255) {
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `TLS alert description must be a byte, got ${description}`);
  }
  return Buffer.from([CONTENT_ALERT, 0x03, 0x03, 0x00, 0x02, LEVEL_FATAL, description]);
}
