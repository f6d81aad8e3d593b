import type { KeyObject } from 'node:crypto';
import { ErrorCodes, GateError } from '../errors.js';

/** A signature algorithm the proxy accepts on requests and uses on what it issues. */
export interface SignatureAlgorithm {
  name: string;
  /** `asymmetricKeyType` of the keys that make it. */
  keyType: 'rsa' | 'ec' | 'ed25519';
  /** The digest for crypto.sign / crypto.verify; null for Ed25519, which hashes internally. */
  hash: string | null;
  /** Its DER AlgorithmIdentifier, as it is written in a certificate or a request. */
  identifierDer: Buffer;
}

function algorithm(name: string, keyType: SignatureAlgorithm['keyType'], hash: string | null, hex: string): SignatureAlgorithm {
  return { name, keyType, hash, identifierDer: Buffer.from(hex, 'hex') };
}

// RSA PKCS#1 v1.5 (RFC 8017 A.2.4, parameters NULL), ECDSA (RFC 5758 §3.2, no parameters),
// Ed25519 (RFC 8410 §3). SHA-1 and RSA-PSS are left out: no agent makes them.
const RSA_SHA256 = algorithm('sha256WithRSAEncryption', 'rsa', 'sha256', '300d06092a864886f70d01010b0500');
const ECDSA_SHA256 = algorithm('ecdsa-with-SHA256', 'ec', 'sha256', '300a06082a8648ce3d040302');
const ED25519 = algorithm('Ed25519', 'ed25519', null, '300506032b6570');

const ACCEPTED: SignatureAlgorithm[] = [
  RSA_SHA256,
  algorithm('sha384WithRSAEncryption', 'rsa', 'sha384', '300d06092a864886f70d01010c0500'),
  algorithm('sha512WithRSAEncryption', 'rsa', 'sha512', '300d06092a864886f70d01010d0500'),
  // RFC 4055 §5 lets the NULL be absent; some encoders leave it out.
  algorithm('sha256WithRSAEncryption', 'rsa', 'sha256', '300b06092a864886f70d01010b'),
  algorithm('sha384WithRSAEncryption', 'rsa', 'sha384', '300b06092a864886f70d01010c'),
  algorithm('sha512WithRSAEncryption', 'rsa', 'sha512', '300b06092a864886f70d01010d'),
  ECDSA_SHA256,
  algorithm('ecdsa-with-SHA384', 'ec', 'sha384', '300a06082a8648ce3d040303'),
  algorithm('ecdsa-with-SHA512', 'ec', 'sha512', '300a06082a8648ce3d040304'),
  ED25519,
];

/** The accepted algorithm whose AlgorithmIdentifier is exactly `der`, if any. */
export function signatureAlgorithmOf(der: Buffer): SignatureAlgorithm | undefined {
  return ACCEPTED.find((a) => a.identifierDer.equals(der));
}

/** What `key` signs with: SHA-256 with RSA or ECDSA, or Ed25519. */
export function signatureAlgorithmFor(key: KeyObject): SignatureAlgorithm {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return RSA_SHA256;
    case 'ec':
      return ECDSA_SHA256;
    case 'ed25519':
      return ED25519;
    default:
      throw new GateError(
        ErrorCodes.INVALID_ARGUMENT,
        `cannot sign with a ${key.asymmetricKeyType ?? 'unknown'} key (RSA, ECDSA or Ed25519)`,
      );
  }
}
