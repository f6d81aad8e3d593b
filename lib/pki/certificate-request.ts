import { generateKeyPairSync } from 'node:crypto';
import forge from 'node-forge';
import { ErrorCodes, GateError } from '../errors.js';

/** A private key (PEM) and a PKCS#10 certificate signing request (PEM) for it. */
export interface KeyAndRequest {
  key: string;
  csr: string;
}

/**
 * A new RSA key and a CSR naming `commonName`, signed with that key (RFC 2986 §3: the signature
 * proves possession). The key is made by Node's native generator, as the CA's are; forge only
 * builds and signs the request. The key never leaves the caller: only the CSR is sent.
 */
export function createKeyAndRequest(commonName: string): KeyAndRequest {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const forgeKey = forge.pki.privateKeyFromPem(pem) as forge.pki.rsa.PrivateKey;
  const csr = forge.pki.createCertificationRequest();
  csr.publicKey = forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e);
  csr.setSubject([{ name: 'commonName', value: commonName }]);
  csr.sign(forgeKey, forge.md.sha256.create());
  return { key: pem, csr: forge.pki.certificationRequestToPem(csr) };
}

/** What the CA needs of a checked CSR. */
export interface VerifiedRequest {
  /** The subject CN, or undefined when there is none. */
  commonName: string | undefined;
  publicKey: forge.pki.PublicKey;
}

/**
 * Parses a PEM CSR and checks its self-signature. Pure; GATE_ERR_JOIN_CSR_INVALID when it is not a
 * well-formed RSA CSR or the signature does not verify (forge reads RSA only, which is what
 * `createKeyAndRequest` makes).
 */
export function verifyRequest(pem: string): VerifiedRequest {
  let csr: forge.pki.CertificateSigningRequest;
  try {
    csr = forge.pki.certificationRequestFromPem(pem);
  } catch (err) {
    throw new GateError(ErrorCodes.JOIN_CSR_INVALID, `not a PEM certificate request: ${(err as Error).message}`, { cause: err });
  }
  let verified = false;
  try {
    verified = csr.verify();
  } catch {
    verified = false;
  }
  if (!verified || !csr.publicKey) throw new GateError(ErrorCodes.JOIN_CSR_INVALID, 'the certificate request signature does not verify');
  const cn = csr.subject.getField('CN') as { value?: unknown } | null;
  return { commonName: typeof cn?.value === 'string' ? cn.value : undefined, publicKey: csr.publicKey };
}
