import { createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import forge from 'node-forge';
import { ErrorCodes, GateError } from '../errors.js';
import { acceptAgentKey } from './agent-key-policy.js';
import { bytesOf, childrenOf, contentOf, DerTag, expectElement, malformed, type readElement } from './der.js';
import { derToPem, pemToDer } from './pem.js';
import { signedStructure } from './signed-structure.js';
import { signatureAlgorithmFor, signatureAlgorithmOf } from './signature-algorithms.js';

/** A private key (PEM) and a PKCS#10 certificate signing request (PEM) for it. */
export interface KeyAndRequest {
  key: string;
  csr: string;
}

/** The kinds of key `createKeyAndRequest` makes; all are on the agent key allow-list. */
export type AgentKeyType = 'rsa' | 'ec' | 'ed25519';

const PEM_LABEL = 'CERTIFICATE REQUEST';

/**
 * A request with an RSA-4096 key and a long name is under 2 KiB of PEM; a bigger one is refused
 * before it is decoded.
 */
export const MAX_CSR_PEM_BYTES = 8 * 1024;

const OID_COMMON_NAME = '550403';

function newKey(type: AgentKeyType): KeyObject {
  if (type === 'ec') return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  if (type === 'ed25519') return generateKeyPairSync('ed25519').privateKey;
  return generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
}

/**
 * A PKCS#10 request naming `commonName` for `privateKey`'s public half, signed with it (RFC 2986
 * §3: the signature proves possession). forge only lays out the ASN.1; Node signs.
 */
export function buildRequest(commonName: string, privateKey: KeyObject): string {
  const asn1 = forge.asn1;
  const spki = createSpki(privateKey);
  const info = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.INTEGER, false, asn1.integerToDer(0).getBytes()),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SET, true, [
        asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
          asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer(forge.pki.oids.commonName!).getBytes()),
          asn1.create(asn1.Class.UNIVERSAL, asn1.Type.UTF8, false, forge.util.encodeUtf8(commonName)),
        ]),
      ]),
    ]),
    asn1.fromDer(spki.toString('binary')),
    asn1.create(asn1.Class.CONTEXT_SPECIFIC, 0, true, []),
  ]);
  const infoDer = Buffer.from(asn1.toDer(info).getBytes(), 'binary');
  const algorithm = signatureAlgorithmFor(privateKey);
  const signature = sign(algorithm.hash, infoDer, privateKey);
  return derToPem(PEM_LABEL, signedStructure(infoDer, algorithm.identifierDer, signature));
}

/** The public half of `privateKey` as DER SubjectPublicKeyInfo. */
function createSpki(privateKey: KeyObject): Buffer {
  return createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
}

/**
 * A new key and a CSR naming `commonName`, signed with that key. The key is made by Node's native
 * generator (RSA-2048 by default). The key never leaves the caller: only the CSR is sent.
 */
export function createKeyAndRequest(commonName: string, keyType: AgentKeyType = 'rsa'): KeyAndRequest {
  const privateKey = newKey(keyType);
  const key = keyType === 'rsa' ? privateKey.export({ type: 'pkcs1', format: 'pem' }) : privateKey.export({ type: 'pkcs8', format: 'pem' });
  return { key: key.toString(), csr: buildRequest(commonName, privateKey) };
}

/** What the CA needs of a checked CSR. */
export interface VerifiedRequest {
  /** The subject CN, or undefined when there is none. */
  commonName: string | undefined;
  /** The requester's public key (on the agent key allow-list). */
  publicKey: KeyObject;
  /** The same key as DER SubjectPublicKeyInfo: what goes into the certificate. */
  spki: Buffer;
}

function invalid(reason: string, cause?: unknown): GateError {
  return new GateError(ErrorCodes.JOIN_CSR_INVALID, reason, cause === undefined ? undefined : { cause });
}

/** The subject's commonName, read from a Name (SEQUENCE OF SET OF {type, value}). */
function commonNameOf(der: Buffer, name: ReturnType<typeof readElement>): string | undefined {
  for (const rdn of childrenOf(der, name, 16)) {
    for (const attribute of childrenOf(der, rdn, 4)) {
      const [type, value] = childrenOf(der, attribute, 2);
      if (!type || !value || type.tag !== DerTag.OID || contentOf(der, type).toString('hex') !== OID_COMMON_NAME) continue;
      const bytes = contentOf(der, value);
      switch (value.tag) {
        case DerTag.UTF8_STRING:
        case DerTag.PRINTABLE_STRING:
        case DerTag.IA5_STRING:
          return bytes.toString('utf8');
        case DerTag.T61_STRING:
          return bytes.toString('latin1');
        case DerTag.BMP_STRING:
          return Buffer.from(bytes).swap16().toString('utf16le');
        default:
          return undefined;
      }
    }
  }
  return undefined;
}

/** A request read and checked up to its signature: what `verifyRequest` verifies. */
interface ParsedRequest {
  verified: VerifiedRequest;
  info: Buffer;
  signature: Buffer;
  hash: string | null;
}

/**
 * Parses a PEM CSR, in bounded time: the PEM is capped (MAX_CSR_PEM_BYTES), the DER walked by a
 * reader that looks at a fixed handful of elements, the key decoded by Node and checked against
 * the agent key allow-list (lib/pki/agent-key-policy.ts), so no signature math happens for a key
 * nobody legitimate makes. Pure; GATE_ERR_JOIN_CSR_INVALID with the reason.
 */
function parseRequest(pem: string): ParsedRequest {
  if (pem.length > MAX_CSR_PEM_BYTES) throw invalid(`the certificate request is ${pem.length} bytes, over ${MAX_CSR_PEM_BYTES}`);
  const der = pemToDer(pem, PEM_LABEL);
  if (!der) throw invalid('not a PEM certificate request');
  let parts: { info: Buffer; name: ReturnType<typeof readElement>; spki: Buffer; algorithm: Buffer; signature: Buffer };
  try {
    const outer = expectElement(der, 0, DerTag.SEQUENCE);
    if (outer.end !== der.length) throw malformed('bytes after the request');
    const [info, algorithm, signature, extra] = childrenOf(der, outer, 3);
    if (!info || !algorithm || !signature || extra) throw malformed('a request has three parts');
    if (info.tag !== DerTag.SEQUENCE || algorithm.tag !== DerTag.SEQUENCE || signature.tag !== DerTag.BIT_STRING)
      throw malformed('unexpected request layout');
    const [version, name, spki] = childrenOf(der, info, 4);
    if (!version || version.tag !== DerTag.INTEGER || !name || name.tag !== DerTag.SEQUENCE || !spki || spki.tag !== DerTag.SEQUENCE) {
      throw malformed('unexpected CertificationRequestInfo layout');
    }
    const bits = contentOf(der, signature);
    if (bits.length < 2 || bits[0] !== 0) throw malformed('the signature is not a whole number of bytes');
    parts = { info: bytesOf(der, info), name, spki: bytesOf(der, spki), algorithm: bytesOf(der, algorithm), signature: bits.subarray(1) };
  } catch (err) {
    throw invalid(`not a well-formed certificate request: ${(err as Error).message}`, err);
  }
  const publicKey = acceptAgentKey(parts.spki);
  const algorithm = signatureAlgorithmOf(parts.algorithm);
  if (!algorithm)
    throw invalid(
      'the request is signed with an algorithm that is not accepted (RSA PKCS#1 v1.5 or ECDSA with SHA-256/384/512, or Ed25519)',
    );
  if (algorithm.keyType !== publicKey.asymmetricKeyType)
    throw invalid(`a ${publicKey.asymmetricKeyType ?? 'unknown'} key cannot make a ${algorithm.name} signature`);
  let commonName: string | undefined;
  try {
    commonName = commonNameOf(der, parts.name);
  } catch (err) {
    throw invalid(`the request's subject is not well-formed: ${(err as Error).message}`, err);
  }
  return {
    verified: { commonName, publicKey, spki: Buffer.from(parts.spki) },
    info: parts.info,
    signature: parts.signature,
    hash: algorithm.hash,
  };
}

const NOT_VERIFIED = 'the certificate request signature does not verify';

/**
 * Parses a PEM CSR (see `parseRequest`: bounded, key allow-list first) and checks its
 * self-signature with OpenSSL, on the calling thread. Pure; GATE_ERR_JOIN_CSR_INVALID.
 */
export function verifyRequest(pem: string): VerifiedRequest {
  const parsed = parseRequest(pem);
  let verified = false;
  try {
    verified = verify(parsed.hash, parsed.info, parsed.verified.publicKey, parsed.signature);
  } catch {
    verified = false;
  }
  if (!verified) throw invalid(NOT_VERIFIED);
  return parsed.verified;
}

/**
 * `verifyRequest` with the signature checked on libuv's thread pool (crypto.verify with a
 * callback): what the proxy's join endpoint uses, so a fleet's requests do not queue their
 * signature checks on the event loop every connection shares.
 */
export async function verifyRequestOffThread(pem: string): Promise<VerifiedRequest> {
  const parsed = parseRequest(pem);
  const verified = await new Promise<boolean>((resolve) => {
    try {
      verify(parsed.hash, parsed.info, parsed.verified.publicKey, parsed.signature, (err, ok) => resolve(!err && ok));
    } catch {
      resolve(false);
    }
  });
  if (!verified) throw invalid(NOT_VERIFIED);
  return parsed.verified;
}
