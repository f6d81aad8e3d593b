// The tunnel framing's codec (lib/tunnel-framing/frames.ts, frame-reader.ts), with no socket:
// every payload written is read back the same, a byte stream cut anywhere gives the same frames,
// and what breaks the framing is refused with the wire error that names it.
import t from 'tap';
import { isGateError, ErrorCodes } from '../../lib/errors.js';
import { FrameReader } from '../../lib/tunnel-framing/frame-reader.js';
import {
  controlFrame,
  decodeAnswer,
  decodeGoAway,
  decodeOpen,
  decodeReset,
  decodeWindow,
  encodeAnswer,
  encodeGoAway,
  encodeOpen,
  encodeReset,
  encodeWindow,
  FRAME_HEADER_BYTES,
  FrameError,
  frameHeader,
  FLAG_END,
  FrameType,
  MAX_FRAME_PAYLOAD,
  MAX_REASON_BYTES,
  WireError,
  wireErrorName,
} from '../../lib/tunnel-framing/frames.js';

function wireCode(fn: () => unknown): number | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof FrameError && isGateError(err, ErrorCodes.TUNNEL_PROTOCOL)) return err.wireCode;
    throw err;
  }
  return undefined;
}

t.test('each payload reads back as it was written', async (t) => {
  const open = { kind: 0, target: 'db.internal:5432', client: '[2001:db8::7]:51234' };
  t.same(decodeOpen(encodeOpen(open)), open);
  t.same(decodeOpen(encodeOpen({ kind: 9, target: 'x:1', client: '' })), { kind: 9, target: 'x:1', client: '' }, 'no client');
  const peered = { kind: 0, target: 'db:5432', client: '10.0.0.1:4000', agent: 'db-agent' };
  t.same(decodeOpen(encodeOpen(peered)), peered, 'a peering open names its agent');
  t.same(
    decodeOpen(encodeOpen({ kind: 0, target: 'x:1', client: '', agent: '' })),
    { kind: 0, target: 'x:1', client: '' },
    'no agent: no field',
  );
  const refusal = { status: 403, code: 'GATE_ERR_AGENT_TARGET_DENIED', reason: 'not in the allow-list: 10.0.0.1:22 ✗' };
  t.same(decodeAnswer(encodeAnswer(refusal)), refusal);
  t.same(decodeAnswer(encodeAnswer({ status: 200, code: '', reason: '' })), { status: 200, code: '', reason: '' });
  t.same(decodeReset(encodeReset({ code: WireError.CANCEL, reason: 'client left' })), { code: 8, reason: 'client left' });
  t.same(decodeGoAway(encodeGoAway({ lastStreamId: 41, code: 0, reason: 'draining' })), { lastStreamId: 41, code: 0, reason: 'draining' });
  t.equal(decodeWindow(encodeWindow(65_535)), 65_535);
  t.equal(wireErrorName(0xb), 'ENHANCE_YOUR_CALM');
  t.equal(wireErrorName(0x99), 'error 153', 'a code this version does not name');
});

t.test('a long reason is cut on a character boundary, and an open refuses what it cannot carry', async (t) => {
  const reason = 'é'.repeat(MAX_REASON_BYTES); // 2 bytes each: twice the bound
  const read = decodeReset(encodeReset({ code: 1, reason })).reason;
  t.ok(Buffer.byteLength(read) <= MAX_REASON_BYTES && Buffer.byteLength(read) >= MAX_REASON_BYTES - 1, 'cut to the bound');
  t.notOk(read.includes('\uFFFD'), 'no character split');
  t.throws(() => encodeOpen({ kind: 0, target: 'h'.repeat(256), client: '' }), { code: ErrorCodes.INVALID_ARGUMENT });
  t.throws(() => encodeOpen({ kind: 0, target: 'a b:1', client: '' }), { code: ErrorCodes.INVALID_ARGUMENT }, 'a space');
  t.throws(() => encodeOpen({ kind: 0, target: 'x:1', client: '', agent: 'a'.repeat(256) }), { code: ErrorCodes.INVALID_ARGUMENT });
});

t.test('malformed payloads are refused with the wire error that names them', async (t) => {
  t.equal(
    wireCode(() => decodeOpen(Buffer.of(0, 5, 0x61))),
    WireError.FRAME_SIZE_ERROR,
    'target longer than the payload',
  );
  t.equal(
    wireCode(() => decodeOpen(Buffer.of(0, 1, 0x61, 0, 0x62))),
    WireError.FRAME_SIZE_ERROR,
    'a byte past the client',
  );
  t.equal(
    wireCode(() => decodeOpen(Buffer.of(0, 1, 0x61, 0, 2, 0x62))),
    WireError.FRAME_SIZE_ERROR,
    'an agent shorter than its length',
  );
  t.equal(
    wireCode(() => decodeOpen(Buffer.of(0, 1, 0x61, 0, 1, 0x0a))),
    WireError.PROTOCOL_ERROR,
    'an agent that is not printable',
  );
  t.equal(
    wireCode(() => decodeOpen(Buffer.of(0, 1, 0x0a, 0))),
    WireError.PROTOCOL_ERROR,
    'a newline in the target',
  );
  t.equal(
    wireCode(() => decodeAnswer(Buffer.of(0, 200))),
    WireError.FRAME_SIZE_ERROR,
    'too short',
  );
  t.equal(
    wireCode(() => decodeAnswer(Buffer.of(0, 200, 9, 0x41))),
    WireError.FRAME_SIZE_ERROR,
    'code longer than the payload',
  );
  t.equal(
    wireCode(() => decodeAnswer(Buffer.of(1, 0x90, 1, 0x3c))),
    WireError.PROTOCOL_ERROR,
    'a code that is not A-Z0-9_',
  );
  t.equal(
    wireCode(() => decodeReset(Buffer.alloc(3))),
    WireError.FRAME_SIZE_ERROR,
  );
  t.equal(
    wireCode(() => decodeReset(Buffer.alloc(4 + MAX_REASON_BYTES + 1))),
    WireError.FRAME_SIZE_ERROR,
    'an over-long reason',
  );
  t.equal(
    wireCode(() => decodeGoAway(Buffer.alloc(7))),
    WireError.FRAME_SIZE_ERROR,
  );
  t.equal(
    wireCode(() => decodeWindow(Buffer.alloc(4))),
    WireError.PROTOCOL_ERROR,
    'a WINDOW of 0',
  );
  t.equal(
    wireCode(() => decodeWindow(Buffer.from([0x80, 0, 0, 0]))),
    WireError.PROTOCOL_ERROR,
    'past 2^31-1',
  );
  t.equal(
    wireCode(() => decodeWindow(Buffer.alloc(5))),
    WireError.FRAME_SIZE_ERROR,
  );
});

/** Frames of every kind and size, as one byte stream, and what a reader should see in it. */
function sampleStream(): { bytes: Buffer; frames: [number, number, number, string][] } {
  const payloads = [
    [FrameType.OPEN, 0, 2, encodeOpen({ kind: 0, target: 'a:1', client: '127.0.0.1:9' })],
    [FrameType.DATA, 0, 2, Buffer.alloc(0)],
    [FrameType.DATA, 1, 2, Buffer.alloc(MAX_FRAME_PAYLOAD, 7)],
    [FrameType.DATA, 0, 4, Buffer.from('hello')],
    [FrameType.PING, 1, 0, Buffer.alloc(8, 3)],
    [42, 0, 0, Buffer.from('a frame type of a later version')],
  ] as const;
  const frames = payloads.map(([type, flags, id, p]) => [type, flags, id, p.toString('hex')] as [number, number, number, string]);
  const bytes = Buffer.concat(payloads.map(([type, flags, id, p]) => controlFrame(type, flags, id, p)));
  return { bytes, frames };
}

type Seen = [number, number, number, string];

/**
 * What a reader's sink saw, with each run of DATA pieces of one stream joined: a DATA frame comes
 * in pieces as its bytes arrive, END on the last alone, so pieces and frames join alike.
 */
function joined(seen: Seen[]): Seen[] {
  const out: Seen[] = [];
  for (const [type, flags, id, hex] of seen) {
    const last = out[out.length - 1];
    if (type === FrameType.DATA && last && last[0] === FrameType.DATA && last[2] === id && (last[1] & FLAG_END) === 0) {
      out[out.length - 1] = [type, flags, id, last[3] + hex];
    } else out.push([type, flags, id, hex]);
  }
  return out;
}

t.test('the reader gives the same frames however the bytes are cut', async (t) => {
  const { bytes, frames } = sampleStream();
  const expected = joined(frames);
  const read = (cuts: number[]): Seen[] => {
    const got: Seen[] = [];
    const reader = new FrameReader((type, flags, id, payload) => got.push([type, flags, id, payload.toString('hex')]));
    let at = 0;
    for (const cut of [...cuts, bytes.length]) {
      reader.push(bytes.subarray(at, cut));
      at = cut;
    }
    t.equal(reader.held, 0, 'nothing held once the last frame is whole');
    return got;
  };
  t.same(read([]), frames, 'in one chunk: each frame whole, in one piece');
  // Every cut point within the first frames, then cuts every 1,000 bytes through the big one.
  let same = 0;
  for (let cut = 1; cut < 80; cut++) if (JSON.stringify(joined(read([cut]))) === JSON.stringify(expected)) same++;
  t.equal(same, 79, 'cut once at each of the first 79 bytes');
  const many: number[] = [];
  for (let cut = 7; cut < bytes.length; cut += 1000) many.push(cut);
  const pieces = read(many);
  t.same(joined(pieces), expected, `cut into ${many.length + 1} pieces`);
  const big = pieces.filter(([type, , id]) => type === FrameType.DATA && id === 2).slice(1);
  t.ok(big.length > 60, `the 64 KiB DATA frame came in ${big.length} pieces, none gathered`);
  t.same(
    big.map(([, flags]) => flags),
    [...Array.from({ length: big.length - 1 }, () => 0), FLAG_END],
    'END on its last piece alone',
  );
  const bytewise: number[] = [];
  for (let cut = 1; cut < bytes.length; cut += cut < 200 ? 1 : 4099) bytewise.push(cut);
  t.same(joined(read(bytewise)), expected, 'one byte at a time through the headers');
});

t.test('a header announcing more than the bound is refused before its payload is awaited', async (t) => {
  const got: number[] = [];
  const reader = new FrameReader((type) => got.push(type));
  reader.push(controlFrame(FrameType.PING, 0, 0, Buffer.alloc(8)));
  const header = frameHeader(FrameType.DATA, 0, 1, MAX_FRAME_PAYLOAD + 1);
  t.equal(
    wireCode(() => reader.push(header.subarray(0, 4))),
    undefined,
    'a partial header is only held',
  );
  t.equal(
    wireCode(() => reader.push(header.subarray(4))),
    WireError.FRAME_SIZE_ERROR,
    'the whole header is refused',
  );
  t.same(got, [FrameType.PING], 'the frame before it was read');
  const fresh = new FrameReader(() => {});
  t.equal(
    wireCode(() => fresh.push(frameHeader(FrameType.DATA, 0, 1, 0xffffff))),
    WireError.FRAME_SIZE_ERROR,
    'a 16 MiB frame',
  );
  t.equal(FRAME_HEADER_BYTES, 9);
});
