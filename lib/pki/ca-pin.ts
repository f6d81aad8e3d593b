import { createHash, X509Certificate } from 'node:crypto';
import { ErrorCodes, GateError } from '../errors.js';

/**
 * The CA pin an agent is given with its join token: `sha256:<hex>` of the CA certificate's DER
 * SubjectPublicKeyInfo. The key rather than the whole certificate, so a CA re-issued with the same
 * key (a longer validity) keeps the pin; the same construction as HTTP Public Key Pinning
 * (RFC 7469 §2.4), written in hex. Pure.
 */
export function caPin(caCertPem: string | Buffer): string {
  const spki = new X509Certificate(caCertPem).publicKey.export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(spki).digest('hex')}`;
}

const PIN = /^sha256:[0-9a-f]{64}$/;

/** Checks a pin's spelling (upper-case hex accepted) and returns it lower-cased; GATE_ERR_INVALID_ARGUMENT otherwise. */
export function parseCaPin(text: string): string {
  const pin = text.trim().toLowerCase();
  if (!PIN.test(pin)) throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'a CA pin is sha256:<64 hex digits> (the proxy prints it at start)');
  return pin;
}
