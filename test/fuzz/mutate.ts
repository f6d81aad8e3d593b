/**
 * Mutations for fuzzing the byte parsers from real inputs: bit flips, byte sets, truncation,
 * splicing two inputs, insertions/deletions, length-field edits (the fields parsers trust most),
 * and TLS record re-framing (the same handshake split into other record sizes, as real clients do).
 */
import type { Prng } from '../helpers/prng.js';

/** The handshake bytes inside TLS records (stops at the first non-handshake or partial record). */
export function unframeRecords(bytes: Buffer): Buffer {
  const parts: Buffer[] = [];
  let p = 0;
  while (p + 5 <= bytes.length && bytes[p] === 0x16) {
    const len = bytes.readUInt16BE(p + 3);
    if (p + 5 + len > bytes.length) break;
    parts.push(bytes.subarray(p + 5, p + 5 + len));
    p += 5 + len;
  }
  return Buffer.concat(parts);
}

/** `message` in handshake records of random sizes (1 byte to 2 KiB), legacy version 3.1. */
export function reframe(message: Buffer, rand: Prng): Buffer {
  const out: Buffer[] = [];
  for (let p = 0; p < message.length; ) {
    const n = Math.min(message.length - p, rand.chance(0.3) ? rand.range(1, 8) : rand.range(1, 2048));
    const header = Buffer.from([0x16, 0x03, 0x01, n >> 8, n & 0xff]);
    out.push(header, message.subarray(p, p + n));
    p += n;
  }
  return Buffer.concat(out);
}

const LENGTH_VALUES = [0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x3fff, 0x4000, 0x7fff, 0x8000, 0xfffe, 0xffff];

/** Applies 1-4 random mutations to a copy of `input`; `corpus` feeds splicing. */
export function mutate(input: Buffer, corpus: readonly Buffer[], rand: Prng): Buffer {
  let b: Buffer = Buffer.from(input);
  for (let m = rand.range(1, 4); m > 0; m--) {
    const op = rand.int(9);
    if (b.length === 0 && op !== 3 && op !== 6) continue;
    switch (op) {
      case 0: // bit flip
        b[rand.int(b.length)]! ^= 1 << rand.int(8);
        break;
      case 1: // random byte
        b[rand.int(b.length)] = rand.int(256);
        break;
      case 2: // truncation
        b = b.subarray(0, rand.int(b.length));
        break;
      case 3: {
        // splice: a prefix of this input and a suffix of another
        const other = rand.pick(corpus);
        b = Buffer.concat([b.subarray(0, rand.int(b.length + 1)), other.subarray(rand.int(other.length + 1))]);
        break;
      }
      case 4: {
        // 16-bit length field edit: a neighbour of the value, or a boundary value
        if (b.length < 2) break;
        const at = rand.int(b.length - 1);
        const v = rand.chance(0.5) ? (b.readUInt16BE(at) + rand.range(-2, 2)) & 0xffff : rand.pick(LENGTH_VALUES);
        b.writeUInt16BE(v, at);
        break;
      }
      case 5: {
        // 24-bit (handshake) length edit
        if (b.length < 3) break;
        const at = rand.int(b.length - 2);
        const v = rand.chance(0.5) ? (b.readUIntBE(at, 3) + rand.range(-2, 2)) & 0xffffff : rand.pick([0, 1, 0x4000, 0xffffff]);
        b.writeUIntBE(v, at, 3);
        break;
      }
      case 6: {
        // insertion of random bytes (or a repeated slice of itself)
        const at = rand.int(b.length + 1);
        const ins =
          rand.chance(0.5) || b.length === 0
            ? rand.bytes(rand.range(1, 16))
            : b.subarray(rand.int(b.length), rand.int(b.length) + 1 + rand.int(32));
        b = Buffer.concat([b.subarray(0, at), ins, b.subarray(at)]);
        break;
      }
      case 7: {
        // deletion
        const at = rand.int(b.length);
        b = Buffer.concat([b.subarray(0, at), b.subarray(at + rand.range(1, 16))]);
        break;
      }
      case 8: {
        // record re-framing of whatever handshake bytes the input carries
        const message = unframeRecords(b);
        if (message.length > 0) b = reframe(message, rand);
        break;
      }
    }
  }
  return b;
}

/** Random chunk boundaries for feeding an input as TCP segments (1..n pieces). */
export function split(input: Buffer, rand: Prng): Buffer[] {
  if (input.length === 0) return [input];
  const pieces: Buffer[] = [];
  const mode = rand.int(3);
  for (let p = 0; p < input.length; ) {
    const n = mode === 0 ? input.length : mode === 1 ? rand.range(1, 4) : rand.range(1, 700);
    pieces.push(input.subarray(p, p + n));
    p += n;
  }
  return pieces;
}
