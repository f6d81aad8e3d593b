import { DerTag } from './der.js';

/**
 * SEQUENCE { toBeSigned, AlgorithmIdentifier, BIT STRING signature }: the shape of both a
 * certificate and a certification request. `toBeSigned` and `algorithm` are DER already.
 */
export function signedStructure(toBeSigned: Buffer, algorithm: Buffer, signature: Buffer): Buffer {
  const bitString = Buffer.concat([derHeader(DerTag.BIT_STRING, signature.length + 1), Buffer.from([0]), signature]);
  const body = Buffer.concat([toBeSigned, algorithm, bitString]);
  return Buffer.concat([derHeader(DerTag.SEQUENCE, body.length), body]);
}

/** A DER tag and definite length. */
function derHeader(tag: number, length: number): Buffer {
  if (length < 0x80) return Buffer.from([tag, length]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n % 256);
  return Buffer.from([tag, 0x80 | bytes.length, ...bytes]);
}
