import { ErrorCodes, GateError } from '../errors.js';
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  X509Certificate,
  type KeyObject,
} from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';
import { signedStructure } from './signed-structure.js';
import { childrenOf, contentOf, DerTag, expectElement } from './der.js';
import { derToPem } from './pem.js';
import { signatureAlgorithmFor } from './signature-algorithms.js';

/** A PEM certificate with its PEM private key. */
export interface KeyPair {
  cert: string;
  key: string;
}

export interface IssueOptions {
  commonName: string;
  /** DNS names for the subjectAltName extension. */
  dnsNames?: string[];
  /** IP literals for the subjectAltName extension. */
  ipAddresses?: string[];
  /** URIs for the subjectAltName extension (a role marker such as the proxy-peering one, lib/wire/names.ts). */
  uris?: string[];
  /** 'server' (default), 'client' or 'both': sets extendedKeyUsage. */
  usage?: 'server' | 'client' | 'both';
  days?: number;
  /** Lifetime in milliseconds, for short-lived certificates; takes precedence over `days`. */
  ttlMs?: number;
  /** How far notBefore is set back, for clocks behind ours (default one hour). */
  backdateMs?: number;
}

/** A certificate the CA issued for a public key it was given (a CSR's), with its serial number. */
export interface IssuedCertificate {
  cert: string;
  /** Lower-case hex, no leading zeros (as `X509Certificate#serialNumber`, lower-cased). */
  serial: string;
  notAfter: Date;
}

/** A new RSA-2048 key pair from Node's native generator (milliseconds; forge's JavaScript one takes 0.1–0.5 s). */
function newRsaKey(): { privateKey: KeyObject; spki: Buffer } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { privateKey, spki: publicKey.export({ type: 'spki', format: 'der' }) };
}

/** RFC 5280 §4.2.1.2 method (1): the SHA-1 of the subjectPublicKey BIT STRING's bits. */
function keyIdentifier(spki: Buffer): Buffer {
  const outer = expectElement(spki, 0, DerTag.SEQUENCE);
  const [, bits] = childrenOf(spki, outer, 2);
  if (!bits || bits.tag !== DerTag.BIT_STRING) throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'not a SubjectPublicKeyInfo');
  return createHash('sha1').update(contentOf(spki, bits).subarray(1)).digest();
}

/**
 * Stands in for the subject key while forge lays out a TBSCertificate (forge encodes RSA keys
 * only); the real SubjectPublicKeyInfo, of any accepted type, replaces it before signing.
 */
const PLACEHOLDER_KEY = forge.pki.setRsaPublicKey(new forge.jsbn.BigInteger('3'), new forge.jsbn.BigInteger('3'));
/** The SubjectPublicKeyInfo's position in a TBSCertificate (RFC 5280 §4.1). */
const TBS_SPKI_INDEX = 6;

function serialNumber(): string {
  return serialFromBytes(randomBytes(16));
}

/**
 * A 16-byte serial from random bytes, as DER must encode it: positive (top bit clear) and with a
 * first byte that is not 0, since a leading zero byte followed by one below 0x80 is padding DER
 * forbids. OpenSSL 3.5 (Nodes 24 and 26) refuses such a certificate ("illegal padding"); clearing the
 * top bit alone made one in 256 serials so.
 */
export function serialFromBytes(random: Buffer): string {
  const bytes = Buffer.from(random);
  bytes[0] = ((bytes[0] ?? 0) % 0x7f) + 1;
  return bytes.toString('hex');
}

/** How far notBefore is set back by default: clocks an hour behind ours still accept the certificate. */
const HOUR_MS = 60 * 60 * 1000;

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * A self-signed certificate authority for development, tests and the example proxy's first start.
 * Not a production CA: keys live in memory and in whatever files the caller writes.
 */
export class CertificateAuthority {
  readonly cert: string;
  readonly key: string;
  /** The CA's subject: the issuer of everything it signs. */
  private readonly subject: forge.pki.CertificateField[];
  private readonly signingKey: KeyObject;
  /** The CA's own key identifier, for each issued certificate's authorityKeyIdentifier. */
  private readonly keyId: Buffer;

  private constructor(cert: string, key: string) {
    this.cert = cert;
    this.key = key;
    // forge reads the certificate once here, for its subject's attribute layout; from then on
    // every signature is Node's.
    this.subject = forge.pki.certificateFromPem(cert).subject.attributes;
    this.signingKey = createPrivateKey(key);
    if (this.signingKey.asymmetricKeyType !== 'rsa') throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'the CA key must be RSA');
    this.keyId = keyIdentifier(new X509Certificate(cert).publicKey.export({ type: 'spki', format: 'der' }));
  }

  static create(commonName = 'gate-mux development CA', days = 3650): CertificateAuthority {
    const keys = newRsaKey();
    const subject = [
      { name: 'commonName', value: commonName },
      { name: 'organizationName', value: 'gate-mux' },
    ];
    const keyId = keyIdentifier(keys.spki);
    const cert = signCertificate({
      spki: keys.spki,
      subject,
      issuer: subject,
      ttlMs: days * DAY_MS,
      backdateMs: HOUR_MS,
      extensions: [
        { name: 'basicConstraints', cA: true, critical: true },
        { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
        {
          name: 'subjectKeyIdentifier',
          value: forge.asn1.create(forge.asn1.Class.UNIVERSAL, forge.asn1.Type.OCTETSTRING, false, keyId.toString('binary')),
        },
      ],
      signingKey: keys.privateKey,
    });
    return new CertificateAuthority(cert.cert, keys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString());
  }

  /** Loads a CA written earlier (PEM files), so a restarted proxy keeps the CA clients trust. */
  static fromPem(pair: KeyPair): CertificateAuthority {
    return new CertificateAuthority(pair.cert, pair.key);
  }

  issue(options: IssueOptions): KeyPair {
    const keys = newRsaKey();
    const issued = this.issueFor(keys.spki, options);
    return { cert: issued.cert, key: keys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString() };
  }

  /**
   * A certificate for a public key the CA never sees the private half of (from a CSR whose
   * signature the caller has checked): how agents get certificates while their keys stay theirs.
   * Takes the key as DER SubjectPublicKeyInfo or a KeyObject; signed natively (about a millisecond
   * for RSA-2048, where forge's JavaScript took about 20: BENCHMARKS.md).
   */
  issueFor(publicKey: KeyObject | Buffer, options: IssueOptions): IssuedCertificate {
    const unsigned = this.prepare(publicKey, options);
    return unsigned.finish(sign(unsigned.hash, unsigned.tbs, this.signingKey));
  }

  /**
   * `issueFor` with the signature made on libuv's thread pool (crypto.sign with a callback): what
   * the proxy uses for agents, so a fleet joining or renewing at once does not queue its RSA
   * signatures on the event loop every connection shares.
   */
  issueForOffThread(publicKey: KeyObject | Buffer, options: IssueOptions): Promise<IssuedCertificate> {
    const unsigned = this.prepare(publicKey, options);
    return new Promise((resolve, reject) => {
      sign(unsigned.hash, unsigned.tbs, this.signingKey, (err, signature) => (err ? reject(err) : resolve(unsigned.finish(signature))));
    });
  }

  private prepare(publicKey: KeyObject | Buffer, options: IssueOptions): UnsignedCertificate {
    const spki = Buffer.isBuffer(publicKey) ? publicKey : createPublicKey(publicKey).export({ type: 'spki', format: 'der' });
    return this.build(spki, options);
  }

  private build(spki: Buffer, options: IssueOptions): UnsignedCertificate {
    for (const ip of options.ipAddresses ?? []) {
      if (isIP(ip) === 0) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `not an IP address: ${ip}`);
    }
    const usage = options.usage ?? 'server';
    const altNames = [
      ...(options.dnsNames ?? []).map((value) => ({ type: 2, value })),
      ...(options.ipAddresses ?? []).map((ip) => ({ type: 7, ip })),
      ...(options.uris ?? []).map((value) => ({ type: 6, value })),
    ];
    const extensions: object[] = [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      {
        name: 'extKeyUsage',
        serverAuth: usage !== 'client',
        clientAuth: usage !== 'server',
      },
      { name: 'authorityKeyIdentifier', keyIdentifier: this.keyId.toString('binary') },
    ];
    if (altNames.length > 0) extensions.push({ name: 'subjectAltName', altNames });
    return unsignedCertificate({
      spki,
      subject: [{ name: 'commonName', value: options.commonName }],
      issuer: this.subject,
      ttlMs: options.ttlMs ?? (options.days ?? 825) * DAY_MS,
      backdateMs: options.backdateMs ?? HOUR_MS,
      extensions,
      signingKey: this.signingKey,
    });
  }
}

interface CertificateFields {
  spki: Buffer;
  subject: forge.pki.CertificateField[];
  issuer: forge.pki.CertificateField[];
  ttlMs: number;
  backdateMs: number;
  extensions: object[];
  signingKey: KeyObject;
}

/** A TBSCertificate ready to be signed, and how to turn its signature into the certificate. */
interface UnsignedCertificate {
  tbs: Buffer;
  hash: string | null;
  finish(signature: Buffer): IssuedCertificate;
}

/**
 * An X.509 v3 certificate to be signed: forge lays out the TBSCertificate's ASN.1 (names,
 * validity, extensions), the subject's SubjectPublicKeyInfo goes in as it came, and the caller
 * has Node's crypto sign the DER (sha256WithRSAEncryption) with the CA key.
 */
function unsignedCertificate(fields: CertificateFields): UnsignedCertificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = PLACEHOLDER_KEY;
  cert.serialNumber = serialNumber();
  const now = Date.now();
  cert.validity.notBefore = new Date(now - fields.backdateMs); // tolerate clock skew
  cert.validity.notAfter = new Date(now + fields.ttlMs);
  cert.setSubject(fields.subject);
  cert.setIssuer(fields.issuer);
  cert.setExtensions(fields.extensions);
  const algorithm = signatureAlgorithmFor(fields.signingKey);
  cert.siginfo.algorithmOid = forge.pki.oids.sha256WithRSAEncryption!;
  // getTBSCertificate is public in forge but missing from its type declarations.
  const tbs = (forge.pki as unknown as { getTBSCertificate(c: forge.pki.Certificate): forge.asn1.Asn1 }).getTBSCertificate(cert);
  (tbs.value as forge.asn1.Asn1[])[TBS_SPKI_INDEX] = forge.asn1.fromDer(fields.spki.toString('binary'));
  const tbsDer = Buffer.from(forge.asn1.toDer(tbs).getBytes(), 'binary');
  return {
    tbs: tbsDer,
    hash: algorithm.hash,
    finish: (signature) => ({
      cert: derToPem('CERTIFICATE', signedStructure(tbsDer, algorithm.identifierDer, signature)),
      serial: cert.serialNumber.replace(/^0+(?=.)/, ''),
      notAfter: cert.validity.notAfter,
    }),
  };
}

/** `unsignedCertificate`, signed on the calling thread. */
function signCertificate(fields: CertificateFields): IssuedCertificate {
  const unsigned = unsignedCertificate(fields);
  return unsigned.finish(sign(unsigned.hash, unsigned.tbs, fields.signingKey));
}
