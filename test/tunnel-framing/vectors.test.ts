// The golden frames (test/tunnel-framing/vectors.json, docs/tunnel-framing.md "Golden frames"):
// the encoder (frames.ts) writes each one byte for byte, and the reader (frame-reader.ts, then the
// payload's decoder) reads each back to the same fields, whole and a byte at a time; the malformed
// ones are refused with their wire error. Another implementation can run the same file.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { FrameReader } from '../../lib/tunnel-framing/frame-reader.js';
import {
  controlFrame,
  decodeAnswer,
  decodeGoAway,
  decodeHello,
  decodeOpen,
  decodeReset,
  decodeWindow,
  encodeAnswer,
  encodeGoAway,
  encodeHello,
  encodeOpen,
  encodeReset,
  encodeWindow,
  FrameError,
  FrameType,
  StreamFrameError,
  wireErrorName,
} from '../../lib/tunnel-framing/frames.js';

interface Vector {
  name: string;
  /** A FrameType's name, or a number for a type this version does not know. */
  type: keyof typeof FrameType | number;
  flags: number;
  streamId: number;
  fields: Record<string, unknown>;
  hex: string;
}

interface Malformed {
  name: string;
  hex: string;
  /** The wire error's name (RFC 9113 §7's numbers). */
  error: string;
  /** True when only the frame's stream ends (RESET), not the session (GOAWAY). */
  stream?: boolean;
}

const vectors = JSON.parse(readFileSync(new URL('../../../test/tunnel-framing/vectors.json', import.meta.url), 'utf8')) as {
  frames: Vector[];
  parseOnly: Vector[];
  malformed: Malformed[];
};

const typeOf = (v: Vector): number => (typeof v.type === 'number' ? v.type : FrameType[v.type]);

/** The payload the encoder writes for `v`'s fields. */
function encodePayload(v: Vector): Buffer {
  const f = v.fields as never;
  switch (v.type) {
    case 'HELLO':
      return encodeHello(f);
    case 'OPEN':
      return encodeOpen(f);
    case 'ANSWER':
      return encodeAnswer(f);
    case 'WINDOW':
      return encodeWindow((v.fields as { increment: number }).increment);
    case 'RESET':
      return encodeReset(f);
    case 'GOAWAY':
      return encodeGoAway(f);
    default:
      return Buffer.from((v.fields as { data: string }).data, 'hex');
  }
}

/** The fields a payload of `type` reads as (throws the FrameError a malformed one gives). */
function decodePayload(type: number, payload: Buffer): Record<string, unknown> {
  switch (type) {
    case FrameType.HELLO:
      return { ...decodeHello(payload) };
    case FrameType.OPEN:
      return { ...decodeOpen(payload) };
    case FrameType.ANSWER:
      return { ...decodeAnswer(payload) };
    case FrameType.WINDOW:
      return { increment: decodeWindow(payload) };
    case FrameType.RESET:
      return { ...decodeReset(payload) };
    case FrameType.GOAWAY:
      return { ...decodeGoAway(payload) };
    default:
      return { data: payload.toString('hex') };
  }
}

interface Read {
  type: number;
  flags: number;
  streamId: number;
  fields: Record<string, unknown>;
}

/**
 * Reads `bytes` as a receiver does, in pieces of `step` bytes: the frames, each decoded. A DATA
 * frame comes in pieces as its bytes arrive (END on the last alone): consecutive pieces of one
 * stream are joined back into the frame (each vector holds one frame). Throws the FrameError of a
 * malformed one.
 */
function read(bytes: Buffer, step: number): Read[] {
  const frames: Read[] = [];
  let data: { streamId: number; flags: number; pieces: Buffer[] } | undefined;
  const endData = (): void => {
    if (!data) return;
    frames.push({
      type: FrameType.DATA,
      flags: data.flags,
      streamId: data.streamId,
      fields: { data: Buffer.concat(data.pieces).toString('hex') },
    });
    data = undefined;
  };
  const reader = new FrameReader((type, flags, streamId, payload) => {
    if (type !== FrameType.DATA) {
      endData();
      frames.push({ type, flags, streamId, fields: decodePayload(type, payload) });
      return;
    }
    if (data?.streamId !== streamId) endData();
    data ??= { streamId, flags: 0, pieces: [] };
    data.flags |= flags;
    data.pieces.push(Buffer.from(payload));
  });
  for (let at = 0; at < bytes.length; at += step) reader.push(bytes.subarray(at, at + step));
  endData();
  return frames;
}

for (const set of ['frames', 'parseOnly'] as const) {
  for (const v of vectors[set]) {
    t.test(`${set}: ${v.name}`, async (t) => {
      const bytes = Buffer.from(v.hex, 'hex');
      if (set === 'frames') {
        const written = controlFrame(typeOf(v), v.flags, v.streamId, encodePayload(v));
        t.equal(written.toString('hex'), v.hex, 'the encoder writes it byte for byte');
      }
      const expected = [{ type: typeOf(v), flags: v.flags, streamId: v.streamId, fields: v.fields }];
      t.same(read(bytes, bytes.length), expected, 'the reader reads it back, whole');
      t.same(read(bytes, 1), expected, 'and a byte at a time');
    });
  }
}

for (const m of vectors.malformed) {
  t.test(`malformed: ${m.name}`, async (t) => {
    const bytes = Buffer.from(m.hex, 'hex');
    for (const step of [bytes.length, 1]) {
      let error: unknown;
      try {
        read(bytes, step);
      } catch (err) {
        error = err;
      }
      t.ok(error instanceof FrameError, `refused (${step === 1 ? 'a byte at a time' : 'whole'})`);
      t.equal(wireErrorName((error as FrameError).wireCode), m.error);
      t.equal(error instanceof StreamFrameError, m.stream === true, m.stream ? 'a stream error' : 'a session error');
    }
  });
}

t.test('every frame type of this version has a golden frame, and every vector name is unique', async (t) => {
  const types = new Set(vectors.frames.map((v) => v.type));
  for (const name of Object.keys(FrameType)) t.ok(types.has(name as keyof typeof FrameType), name);
  const names = [...vectors.frames, ...vectors.parseOnly, ...vectors.malformed].map((v) => v.name);
  t.equal(new Set(names).size, names.length);
});
