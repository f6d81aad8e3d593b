import { randomBytes } from 'node:crypto';
import forge from 'node-forge';

/**
 * Certificate requests no agent makes, laid out byte by byte with forge's ASN.1 (no arithmetic):
 * an RSA key of any modulus and exponent size, any signature bytes. What an attacker sends to
 * make a JavaScript verifier spend seconds on one request.
 */
export interface HostileCsrOptions {
  name?: string;
  modulusBits: number;
  exponentBits: number;
  /** Signature bytes; default random, as long as the modulus and below it (so a verifier does the exponentiation). */
  signature?: Buffer;
}

const asn1 = forge.asn1;

function positiveInteger(bits: number): forge.asn1.Asn1 {
  const bytes = randomBytes(Math.ceil(bits / 8));
  bytes[0] = bytes[0]! | 0x80; // the full bit length
  bytes[bytes.length - 1] = bytes[bytes.length - 1]! | 1; // odd, as an RSA exponent and modulus are
  return asn1.create(asn1.Class.UNIVERSAL, asn1.Type.INTEGER, false, Buffer.concat([Buffer.from([0]), bytes]).toString('binary'));
}

function sequence(...items: forge.asn1.Asn1[]): forge.asn1.Asn1 {
  return asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, items);
}

function oid(id: string): forge.asn1.Asn1 {
  return asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer(id).getBytes());
}

const NULL = (): forge.asn1.Asn1 => asn1.create(asn1.Class.UNIVERSAL, asn1.Type.NULL, false, '');

/** A PEM request with such an RSA key, "signed" with sha256WithRSAEncryption. */
export function hostileRsaCsr(options: HostileCsrOptions): string {
  const publicKey = sequence(positiveInteger(options.modulusBits), positiveInteger(options.exponentBits));
  const spki = sequence(
    sequence(oid(forge.pki.oids.rsaEncryption!), NULL()),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, '\0' + asn1.toDer(publicKey).getBytes()),
  );
  const info = sequence(
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.INTEGER, false, '\0'),
    sequence(
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SET, true, [
        sequence(oid(forge.pki.oids.commonName!), asn1.create(asn1.Class.UNIVERSAL, asn1.Type.UTF8, false, options.name ?? 'evil')),
      ]),
    ),
    spki,
    asn1.create(asn1.Class.CONTEXT_SPECIFIC, 0, true, []),
  );
  const signature = options.signature ?? randomBytes(Math.ceil(options.modulusBits / 8));
  if (!options.signature) signature[0] = signature[0]! & 0x7f; // the modulus's top bit is set
  const request = sequence(
    info,
    sequence(oid(forge.pki.oids.sha256WithRSAEncryption!), NULL()),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, '\0' + signature.toString('binary')),
  );
  return forge.pem.encode({ type: 'CERTIFICATE REQUEST', body: asn1.toDer(request).getBytes() });
}
