// What a reader holds unread (lib/tunnel-framing/held-pieces.ts): the bytes in order, in few
// objects whatever the pieces' sizes, small pieces copied so they never pin their read.
import t from 'tap';
import { HOLD_AS_IS_BYTES, HeldPieces } from '../../lib/tunnel-framing/held-pieces.js';

function drain(held: HeldPieces): Buffer {
  const out: Buffer[] = [];
  for (let piece = held.shift(); piece; piece = held.shift()) out.push(piece);
  return Buffer.concat(out);
}

t.test('a million one-byte pieces: in order, in a few dozen objects', async (t) => {
  const held = new HeldPieces();
  const read = Buffer.alloc(1);
  for (let i = 0; i < 1 << 20; i++) {
    read[0] = i & 0xff;
    held.add(read); // the same read buffer each time, reused as a relay reuses its own
  }
  t.equal(held.bytes, 1 << 20);
  t.ok(held.count <= 80, `${held.count} objects for 1 MiB of one-byte pieces`);
  const all = drain(held);
  t.equal(all.length, 1 << 20);
  t.ok(
    all.every((b, i) => b === (i & 0xff)),
    'copied, in order',
  );
  t.equal(held.bytes, 0);
});

t.test('bulk pieces that are most of their read are held as they are; small ones are copied', async (t) => {
  const held = new HeldPieces();
  const bulk = Buffer.alloc(HOLD_AS_IS_BYTES * 2, 1);
  const smallRead = Buffer.alloc(64 * 1024, 2);
  held.add(smallRead.subarray(0, 10));
  held.add(bulk);
  held.add(Buffer.from('tail'));
  t.equal(held.count, 3);
  const first = held.shift()!;
  t.not(first.buffer, smallRead.buffer, 'a small view is copied: it does not pin its 64 KiB read');
  t.equal(held.shift(), bulk, 'bulk, not copied');
  t.equal(held.shift()?.toString(), 'tail');
  t.equal(held.shift(), undefined);
});

t.test('takeAll gives everything as one buffer and leaves nothing held', async (t) => {
  const held = new HeldPieces();
  t.equal(held.takeAll(), undefined);
  for (const s of ['a', 'bc', 'def']) held.add(Buffer.from(s));
  held.add(Buffer.alloc(0));
  t.equal(held.takeAll()?.toString(), 'abcdef');
  t.equal(held.bytes, 0);
  t.equal(held.count, 0);
});
