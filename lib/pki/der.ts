/**
 * A minimal, bounded DER reader for the few structures the proxy reads from anonymous clients
 * (a PKCS#10 request and its SubjectPublicKeyInfo). Pure and iterative: it only ever looks at the
 * element it is asked for, so input of any shape costs time proportional to the bytes walked,
 * never recursion depth or big-number arithmetic. Anything it does not accept throws
 * GATE_ERR_INVALID_ARGUMENT; callers turn that into their own code.
 */
import { ErrorCodes, GateError } from '../errors.js';

/** What the reader throws: GATE_ERR_INVALID_ARGUMENT with the reason. */
export function malformed(reason: string): GateError {
  return new GateError(ErrorCodes.INVALID_ARGUMENT, reason);
}

/** One DER element: its tag byte and where its header and content lie in the buffer. */
export interface DerElement {
  tag: number;
  /** Offset of the tag byte. */
  start: number;
  /** Offset of the first content byte. */
  contentStart: number;
  /** Offset just past the content. */
  end: number;
}

export const DerTag = {
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  PRINTABLE_STRING: 0x13,
  T61_STRING: 0x14,
  IA5_STRING: 0x16,
  BMP_STRING: 0x1e,
  SEQUENCE: 0x30,
  SET: 0x31,
  /** [0] constructed, context-specific (a request's attributes). */
  CONTEXT_0: 0xa0,
} as const;

/**
 * The element at `offset`, which must end at or before `limit`. Only single-byte tags and
 * definite lengths of at most four bytes (DER's rules; 4 GiB is far beyond any input we take).
 */
export function readElement(der: Uint8Array, offset: number, limit = der.length): DerElement {
  if (offset + 2 > limit) throw malformed('truncated DER element');
  const tag = der[offset]!;
  if ((tag & 0x1f) === 0x1f) throw malformed('multi-byte DER tags are not accepted');
  const first = der[offset + 1]!;
  let length: number;
  let contentStart: number;
  if (first < 0x80) {
    length = first;
    contentStart = offset + 2;
  } else {
    const bytes = first & 0x7f;
    if (bytes === 0) throw malformed('indefinite lengths are not DER');
    if (bytes > 4) throw malformed('DER length over four bytes');
    if (offset + 2 + bytes > limit) throw malformed('truncated DER length');
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[offset + 2 + i]!;
    contentStart = offset + 2 + bytes;
  }
  const end = contentStart + length;
  if (end > limit) throw malformed('DER element runs past its container');
  return { tag, start: offset, contentStart, end };
}

/** The element at `offset` with tag `tag` (error otherwise). */
export function expectElement(der: Uint8Array, offset: number, tag: number, limit = der.length): DerElement {
  const element = readElement(der, offset, limit);
  if (element.tag !== tag) throw malformed(`expected DER tag 0x${tag.toString(16)}, got 0x${element.tag.toString(16)}`);
  return element;
}

/** The direct children of a constructed element, in order; at most `max` of them. */
export function childrenOf(der: Uint8Array, parent: DerElement, max: number): DerElement[] {
  const children: DerElement[] = [];
  let offset = parent.contentStart;
  while (offset < parent.end) {
    if (children.length === max) throw malformed(`more than ${max} DER elements where at most ${max} are expected`);
    const child = readElement(der, offset, parent.end);
    children.push(child);
    offset = child.end;
  }
  return children;
}

/** The content bytes of `element` (a view, not a copy). */
export function contentOf(der: Uint8Array, element: DerElement): Buffer {
  return Buffer.from(der.buffer, der.byteOffset + element.contentStart, element.end - element.contentStart);
}

/** The whole element, header included (a view, not a copy): what a signature covers. */
export function bytesOf(der: Uint8Array, element: DerElement): Buffer {
  return Buffer.from(der.buffer, der.byteOffset + element.start, element.end - element.start);
}
