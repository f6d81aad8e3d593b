import { ErrorCodes, GateError } from '../errors.js';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';

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

// Keys come from Node's native generator (milliseconds) rather than forge's pure-JS one
// (RSA-2048 in forge's JavaScript takes 0.1–0.5 s); forge only builds and signs the X.509 structure,
// which it can do with RSA keys only.
function newRsaKey(): { privateKey: forge.pki.rsa.PrivateKey; publicKey: forge.pki.rsa.PublicKey } {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const forgeKey = forge.pki.privateKeyFromPem(pem) as forge.pki.rsa.PrivateKey;
  return { privateKey: forgeKey, publicKey: forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e) };
}

function serialNumber(): string {
  // Positive 16-byte serial: clear the top bit so DER does not read it as negative.
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return bytes.toString('hex');
}

const HOUR_MS = 60 * 60 * 1000;

function validity(cert: forge.pki.Certificate, ttlMs: number, backdateMs = HOUR_MS): void {
  const now = Date.now();
  cert.validity.notBefore = new Date(now - backdateMs); // tolerate clock skew (an hour by default)
  cert.validity.notAfter = new Date(now + ttlMs);
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * A self-signed certificate authority for development, tests and the example proxy's first start.
 * Not a production CA: keys live in memory and in whatever files the caller writes.
 */
export class CertificateAuthority {
  readonly cert: string;
  readonly key: string;
  private readonly forgeCert: forge.pki.Certificate;
  private readonly forgeKey: forge.pki.rsa.PrivateKey;

  private constructor(cert: forge.pki.Certificate, key: forge.pki.rsa.PrivateKey) {
    this.forgeCert = cert;
    this.forgeKey = key;
    this.cert = forge.pki.certificateToPem(cert);
    this.key = forge.pki.privateKeyToPem(key);
  }

  static create(commonName = 'gate-mux development CA', days = 3650): CertificateAuthority {
    const keys = newRsaKey();
    const cert = forge.pki.createCertificate();
    cert.publicKey = keys.publicKey;
    cert.serialNumber = serialNumber();
    validity(cert, days * DAY_MS);
    const subject = [{ name: 'commonName', value: commonName }, { name: 'organizationName', value: 'gate-mux' }];
    cert.setSubject(subject);
    cert.setIssuer(subject);
    cert.setExtensions([
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    cert.sign(keys.privateKey, forge.md.sha256.create());
    return new CertificateAuthority(cert, keys.privateKey);
  }

  /** Loads a CA written earlier (PEM files), so a restarted proxy keeps the CA clients trust. */
  static fromPem(pair: KeyPair): CertificateAuthority {
    return new CertificateAuthority(
      forge.pki.certificateFromPem(pair.cert),
      forge.pki.privateKeyFromPem(pair.key) as forge.pki.rsa.PrivateKey,
    );
  }

  issue(options: IssueOptions): KeyPair {
    const keys = newRsaKey();
    const cert = this.build(keys.publicKey, options);
    return { cert: forge.pki.certificateToPem(cert), key: forge.pki.privateKeyToPem(keys.privateKey) };
  }

  /**
   * A certificate for a public key the CA never sees the private half of (from a CSR whose
   * signature the caller has checked): how agents get certificates while their keys stay theirs.
   */
  issueFor(publicKey: forge.pki.PublicKey, options: IssueOptions): IssuedCertificate {
    const cert = this.build(publicKey, options);
    return { cert: forge.pki.certificateToPem(cert), serial: cert.serialNumber.replace(/^0+(?=.)/, ''), notAfter: cert.validity.notAfter };
  }

  private build(publicKey: forge.pki.PublicKey, options: IssueOptions): forge.pki.Certificate {
    const cert = forge.pki.createCertificate();
    cert.publicKey = publicKey;
    cert.serialNumber = serialNumber();
    validity(cert, options.ttlMs ?? (options.days ?? 825) * DAY_MS, options.backdateMs);
    cert.setSubject([{ name: 'commonName', value: options.commonName }]);
    cert.setIssuer(this.forgeCert.subject.attributes);
    const usage = options.usage ?? 'server';
    const altNames = [
      ...(options.dnsNames ?? []).map((value) => ({ type: 2, value })),
      ...(options.ipAddresses ?? []).map((ip) => ({ type: 7, ip })),
      ...(options.uris ?? []).map((value) => ({ type: 6, value })),
    ];
    for (const ip of options.ipAddresses ?? []) {
      if (isIP(ip) === 0) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `not an IP address: ${ip}`);
    }
    const extensions: object[] = [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      {
        name: 'extKeyUsage',
        serverAuth: usage !== 'client',
        clientAuth: usage !== 'server',
      },
      { name: 'authorityKeyIdentifier', keyIdentifier: this.forgeCert.generateSubjectKeyIdentifier().getBytes() },
    ];
    if (altNames.length > 0) extensions.push({ name: 'subjectAltName', altNames });
    cert.setExtensions(extensions);
    cert.sign(this.forgeKey, forge.md.sha256.create());
    return cert;
  }
}
