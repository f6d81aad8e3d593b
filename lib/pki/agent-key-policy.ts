import { createPublicKey, type KeyObject } from 'node:crypto';
import { ErrorCodes, GateError } from '../errors.js';

/**
 * The keys an agent may present in a certificate request: what agent software actually makes,
 * and nothing whose signature check could be made expensive. RSA 2048–4096 bits with the
 * universal public exponent 65537 (a huge exponent made one forge verification take 17 s; a huge
 * modulus costs quadratically more), ECDSA on P-256 or P-384, and Ed25519. Anything else is
 * refused before any signature is checked.
 */
export const AGENT_KEY_POLICY = {
  rsaMinBits: 2048,
  rsaMaxBits: 4096,
  rsaExponent: 65537n,
  /** OpenSSL's names for P-256 and P-384, as `asymmetricKeyDetails.namedCurve` reports them. */
  curves: ['prime256v1', 'secp384r1'] as readonly string[],
} as const;

/**
 * An RSA-4096 SubjectPublicKeyInfo is 550 bytes; the cap leaves room for a few bytes of slack and
 * refuses an oversized key before OpenSSL decodes it.
 */
export const MAX_SPKI_BYTES = 600;

function refuse(reason: string): GateError {
  return new GateError(ErrorCodes.JOIN_CSR_INVALID, `the certificate request's key is not accepted: ${reason}`);
}

/**
 * Decodes a DER SubjectPublicKeyInfo with Node's crypto and checks it against AGENT_KEY_POLICY.
 * Returns the key; GATE_ERR_JOIN_CSR_INVALID with the reason otherwise. Decoding is a parse: no
 * arithmetic on the key happens here.
 */
export function acceptAgentKey(spki: Buffer): KeyObject {
  if (spki.length > MAX_SPKI_BYTES)
    throw refuse(`its SubjectPublicKeyInfo is ${spki.length} bytes, over ${MAX_SPKI_BYTES} (larger than RSA-4096)`);
  let key: KeyObject;
  try {
    key = createPublicKey({ key: spki, format: 'der', type: 'spki' });
  } catch (err) {
    throw refuse(`not a public key Node can read (${(err as Error).message})`);
  }
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'rsa': {
      const bits = details.modulusLength ?? 0;
      if (bits < AGENT_KEY_POLICY.rsaMinBits || bits > AGENT_KEY_POLICY.rsaMaxBits) {
        throw refuse(`RSA modulus of ${bits} bits (accepted: ${AGENT_KEY_POLICY.rsaMinBits}–${AGENT_KEY_POLICY.rsaMaxBits})`);
      }
      if (details.publicExponent !== AGENT_KEY_POLICY.rsaExponent) throw refuse('RSA public exponent other than 65537');
      return key;
    }
    case 'ec': {
      const curve = details.namedCurve ?? '(unnamed)';
      if (!AGENT_KEY_POLICY.curves.includes(curve)) throw refuse(`ECDSA curve ${curve} (accepted: P-256, P-384)`);
      return key;
    }
    case 'ed25519':
      return key;
    default:
      throw refuse(`key type ${key.asymmetricKeyType ?? 'unknown'} (accepted: RSA, ECDSA P-256/P-384, Ed25519)`);
  }
}
