// ReadBuffer without a socket: drives its onread hooks the way net's onStreamRead does (fill the
// current buffer, call back, ask for the next buffer) and checks which memory the sink gets.
import t from 'tap';
import { ReadBuffer } from '../../lib/transport/read-buffer.js';

type Hooks = { buffer: () => Buffer; callback: (n: number, buf: Buffer) => boolean };

/** One read of `bytes` into the reader's current buffer; returns the callback's verdict. */
function read(reader: ReadBuffer, bytes: Buffer): { buf: Buffer; result: boolean } {
  const hooks = reader.onread as unknown as Hooks;
  const buf = hooks.buffer();
  bytes.copy(buf, 0, 0, Math.min(bytes.length, buf.length));
  const result = hooks.callback(Math.min(bytes.length, buf.length), buf);
  return { buf, result };
}

const fill = (n: number, byte: number): Buffer => Buffer.alloc(n, byte);

t.test('small reads are copied out of the shared buffer, so the sink may keep them', async (t) => {
  const a = new ReadBuffer();
  const b = new ReadBuffer();
  const got: Array<{ chunk: Buffer; reused: boolean }> = [];
  a.attach((chunk, reused) => {
    got.push({ chunk, reused });
    return true;
  });
  b.attach(() => true);
  const first = read(a, fill(100, 0x61));
  const second = read(b, fill(100, 0x62));
  t.equal(first.buf, second.buf, 'both connections read into the same shared buffer');
  t.equal(got[0]!.reused, false, "the chunk is the sink's to keep");
  t.equal(got[0]!.chunk.toString(), 'a'.repeat(100), "not overwritten by the other connection's read");
});

t.test('a read that fills the shared buffer moves the connection to its own buffer, relayed in place', async (t) => {
  const reader = new ReadBuffer();
  const got: Array<{ chunk: Buffer; reused: boolean }> = [];
  reader.attach((chunk, reused) => {
    got.push({ chunk, reused });
    return true;
  });
  const shared = (reader.onread as unknown as Hooks).buffer();
  read(reader, fill(shared.length, 1));
  const own = (reader.onread as unknown as Hooks).buffer();
  t.not(own, shared, 'its own buffer next');
  t.ok(own.length > shared.length, 'and a larger one');
  read(reader, fill(own.length, 2));
  t.equal(got[1]!.reused, true, 'a view of the own buffer, reused by the next read');
  t.equal(got[1]!.chunk.buffer, own.buffer, 'no copy');
  // A small read goes back to the shared buffer; that last view is then no longer reused.
  read(reader, fill(10, 3));
  t.equal(got[2]!.reused, false, 'the own buffer is released to the sink');
  t.equal((reader.onread as unknown as Hooks).buffer(), shared, 'back on the shared buffer');
});

t.test('bytes read before a sink attaches are held and delivered on attach', async (t) => {
  const reader = new ReadBuffer();
  const { result } = read(reader, Buffer.from('early'));
  t.equal(result, false, 'reading stops while nobody consumes');
  read(new ReadBuffer(), Buffer.from('other connection overwrites the shared buffer'));
  let seen = '';
  t.equal(
    reader.attach((chunk) => {
      seen = chunk.toString();
      return true;
    }),
    true,
    'caller may resume',
  );
  t.equal(seen, 'early');
  t.equal(
    new ReadBuffer().attach(() => false),
    true,
    'nothing held: nothing delivered',
  );
});

t.test("the sink's verdict stops reading", async (t) => {
  const reader = new ReadBuffer();
  reader.attach(() => false);
  t.equal(read(reader, Buffer.from('x')).result, false);
});
