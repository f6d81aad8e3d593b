// The `-ping` ALPN variants' length prefix (lib/length-prefix/ping-frames.ts): uint32 big-endian
// length + payload, a zero length a keep-alive ping the reader drops.
import t from 'tap';
import { lengthPrefix, PING_FRAME, PingFrameDecoder } from '../../lib/length-prefix/ping-frames.js';
import { prng } from '../helpers/prng.js';

t.test('the prefix is the length as uint32 big-endian; a ping is a zero prefix', async (t) => {
  t.same([...lengthPrefix(0)], [0, 0, 0, 0]);
  t.same([...lengthPrefix(4)], [0, 0, 0, 4]);
  t.same([...lengthPrefix(0x01020304)], [1, 2, 3, 4]);
  t.same([...lengthPrefix(0xffffffff)], [0xff, 0xff, 0xff, 0xff]);
  t.same([...PING_FRAME], [0, 0, 0, 0]);
});

t.test('the decoder hands on payloads, drops pings, and knows a frame boundary', async (t) => {
  const decoder = new PingFrameDecoder();
  const out = decoder.push(Buffer.concat([PING_FRAME, lengthPrefix(4), Buffer.from('PING'), PING_FRAME]));
  t.same(Buffer.concat(out).toString(), 'PING');
  t.ok(decoder.atBoundary, 'between frames');
  t.same(decoder.push(Buffer.concat([lengthPrefix(6), Buffer.from('abc')])).map(String), ['abc']);
  t.notOk(decoder.atBoundary, 'inside a payload');
  t.same(decoder.push(Buffer.from([0x64, 0x65, 0x66, 0, 0])).map(String), ['def']);
  t.notOk(decoder.atBoundary, 'inside a prefix');
  t.same(decoder.push(Buffer.from([0, 0])), [], 'the ping ends, nothing handed on');
  t.ok(decoder.atBoundary);
});

t.test('a frame announcing 4 GiB holds no more than the chunk in hand', async (t) => {
  const decoder = new PingFrameDecoder();
  const chunk = Buffer.alloc(1024, 1);
  const out = decoder.push(Buffer.concat([lengthPrefix(0xffffffff), chunk]));
  t.equal(out.length, 1);
  t.equal(out[0]!.length, 1024, 'the payload so far, as it arrived');
  t.notOk(decoder.atBoundary);
});

t.test('any split of a stream of frames gives the same payload bytes', async (t) => {
  const random = prng(39);
  const payloads = Array.from({ length: 40 }, (_, i) => Buffer.alloc(random.u32() % 300, i));
  const wire = Buffer.concat(
    payloads.flatMap((p, i) => (i % 3 === 0 ? [PING_FRAME, lengthPrefix(p.length), p] : [lengthPrefix(p.length), p])),
  );
  const expected = Buffer.concat(payloads);
  for (let trial = 0; trial < 50; trial++) {
    const decoder = new PingFrameDecoder();
    const got: Buffer[] = [];
    for (let at = 0; at < wire.length; ) {
      const size = 1 + (random.u32() % 64);
      got.push(...decoder.push(wire.subarray(at, at + size)));
      at += size;
    }
    if (!Buffer.concat(got).equals(expected)) t.fail(`trial ${trial}: the payload differs`);
    if (!decoder.atBoundary) t.fail(`trial ${trial}: not at a boundary at the end`);
  }
  t.pass('50 random splits');
});
