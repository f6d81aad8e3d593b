import { ErrorCodes, GateError, type ErrorCode } from '../errors.js';
import { agentNameOf } from './agent-identity.js';

/** What the tunnel route knows of an agent's TLS connection once the handshake is done. */
export interface AgentTlsFacts {
  /** True when the client certificate verified against the cluster CA. */
  authorized: boolean;
  /** OpenSSL's verification error code (`CERT_HAS_EXPIRED`, `UNABLE_TO_VERIFY_LEAF_SIGNATURE`, ...). */
  authorizationError: string | undefined;
  /** The peer certificate's fields, or undefined when the agent sent none. */
  certificate: { subject?: { CN?: string | string[] }; subjectaltname?: string; serialNumber?: string } | undefined;
}

/**
 * OpenSSL's verification code out of `TLSSocket#authorizationError`, which Node types as an Error
 * but gives as an Error with `code` (`CERT_HAS_EXPIRED`) on some versions and a bare string on others.
 */
export function verifyErrorCode(error: unknown): string | undefined {
  if (error === null || error === undefined) return undefined;
  if (typeof error === 'string') return error;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : (error as Error).message;
}

/** Serial numbers as the revocation list holds them: lower-case hex without leading zeros. */
export function normalizeSerial(serial: string): string {
  return serial
    .replace(/:/g, '')
    .toLowerCase()
    .replace(/^0+(?=.)/, '');
}

/**
 * Decides whether an agent's connection may register, and under which name. The tunnel route asks
 * for a client certificate without letting OpenSSL reject it (`rejectUnauthorized: false`), so that
 * each refusal gets its own code here (and is told to the agent) instead of one handshake failure:
 * no or foreign certificate GATE_ERR_AGENT_CERT_UNTRUSTED, expired GATE_ERR_AGENT_CERT_EXPIRED,
 * revoked GATE_ERR_AGENT_CERT_REVOKED, no usable name GATE_ERR_AGENT_IDENTITY. Pure.
 */
export function admitAgent(facts: AgentTlsFacts, isRevoked: (serial: string) => boolean): string {
  const cert = facts.certificate;
  if (!cert || cert.serialNumber === undefined) {
    throw new GateError(
      ErrorCodes.AGENT_CERT_UNTRUSTED,
      'no client certificate: an agent authenticates with the certificate it got by joining',
    );
  }
  if (!facts.authorized) {
    const why = facts.authorizationError ?? 'not verified';
    // Expiry is checked by OpenSSL after the signature, so an expired certificate is one of ours.
    if (why === 'CERT_HAS_EXPIRED')
      throw new GateError(ErrorCodes.AGENT_CERT_EXPIRED, 'the agent certificate has expired: join again with a token');
    throw new GateError(ErrorCodes.AGENT_CERT_UNTRUSTED, `the agent certificate is not from this proxy's CA (${why})`);
  }
  if (isRevoked(normalizeSerial(cert.serialNumber))) {
    throw new GateError(ErrorCodes.AGENT_CERT_REVOKED, `the agent certificate (serial ${normalizeSerial(cert.serialNumber)}) is revoked`);
  }
  return agentNameOf({ commonName: cert.subject?.CN, subjectAltName: cert.subjectaltname });
}

/** The GOAWAY reason a refused agent receives: `<code> <message>`. */
export function refusalDebugData(error: GateError): Buffer {
  return Buffer.from(`${error.code} ${error.message}`.replace(/[^\x20-\x7e]/g, '?').slice(0, 400));
}

const KNOWN_CODES = new Set<string>(Object.values(ErrorCodes));

/** Reads a refusal out of a GOAWAY's reason; undefined when it carries no code this version knows. */
export function readRefusalDebugData(data: Buffer | undefined): { code: ErrorCode; message: string } | undefined {
  const text = data?.toString('latin1') ?? '';
  const match = /^(GATE_ERR_[A-Z0-9_]+) (.*)$/s.exec(text);
  if (!match || !KNOWN_CODES.has(match[1]!)) return undefined;
  return { code: match[1] as ErrorCode, message: match[2]! };
}
