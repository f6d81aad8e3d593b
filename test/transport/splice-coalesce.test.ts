// splice's coalescing relay (the tunnel's stream sides) on streams the test drives by
// hand: how chunks are batched into the destination's writes, where backpressure starts, and
// that the end still travels.
import t from 'tap';
import { once } from 'node:events';
import { Duplex } from 'node:stream';
import { setImmediate as turn } from 'node:timers/promises';
import { splice } from '../../lib/transport/splice.js';

interface Sink {
  stream: Duplex;
  /** Chunks per write call the sink received (1 for write, n for writev). */
  batches: number[];
  bytes: number;
  /** Completes every write the sink holds (the "kernel" took them). */
  release(): void;
  finished: boolean;
}

function sink(): Sink {
  const held: Array<() => void> = [];
  const s: Sink = {
    batches: [],
    bytes: 0,
    finished: false,
    release: () => {
      for (const cb of held.splice(0)) cb();
    },
    stream: new Duplex({
      allowHalfOpen: true,
      read() {},
      write(chunk: Buffer, _enc, cb) {
        s.batches.push(1);
        s.bytes += chunk.length;
        held.push(() => cb());
      },
      writev(chunks, cb) {
        s.batches.push(chunks.length);
        for (const { chunk } of chunks) s.bytes += (chunk as Buffer).length;
        held.push(() => cb());
      },
      final(cb) {
        s.finished = true;
        cb();
      },
    }),
  };
  return s;
}

function source(): Duplex {
  return new Duplex({ allowHalfOpen: true, read() {}, write: (_c, _e, cb) => cb() });
}

const KiB = Buffer.alloc(1024, 0x61);

/** Past the relay's own flush: the check phase after the one the pushes' 'data' events ran in. */
async function settle(): Promise<void> {
  await turn();
  await turn();
}

t.test('chunks that arrive in one turn leave in one write', async (t) => {
  const src = source();
  const dst = sink();
  splice(src, dst.stream, () => {}, undefined, { coalesceA: true });
  for (let i = 0; i < 10; i++) src.push(KiB);
  await settle();
  t.same(dst.batches, [10], 'one writev of the ten chunks');
  dst.release();
  for (let i = 0; i < 3; i++) src.push(KiB);
  await settle();
  t.same(dst.batches, [10, 3], 'the next turn is its own batch');
  t.equal(dst.bytes, 13 * 1024, 'every byte passed');
});

t.test('backpressure starts at 256 KiB queued, not at the 16 KiB high-water mark, and releases', async (t) => {
  const src = source();
  const dst = sink();
  splice(src, dst.stream, () => {}, undefined, { coalesceA: true });
  for (let i = 0; i < 100; i++) src.push(KiB);
  await settle();
  t.notOk(src.isPaused(), '100 KiB queued: still reading (plain relay would have paused at 16 KiB)');
  for (let i = 0; i < 500; i++) src.push(KiB);
  await settle();
  t.ok(src.isPaused(), 'paused once 256 KiB wait');
  t.ok(
    dst.stream.writableLength >= 256 * 1024 && dst.stream.writableLength < 260 * 1024,
    `bounded (${dst.stream.writableLength} B queued)`,
  );
  src.push(null);
  for (let i = 0; i < 50 && !dst.finished; i++) {
    dst.release();
    await turn();
  }
  t.equal(dst.bytes, 600 * 1024, 'all 600 KiB arrived once the sink took its writes');
  t.ok(dst.finished, "the source's end reached the sink");
});

t.test('tiny chunks pause the source at 256 queued writes, not at 256 KiB of them, and resume once written', async (t) => {
  const src = source();
  const dst = sink();
  splice(src, dst.stream, () => {}, undefined, { coalesceA: true });
  const one = Buffer.from('x');
  for (let i = 0; i < 300; i++) src.push(one);
  await settle();
  t.ok(src.isPaused(), 'paused: one-byte chunks would otherwise be an entry each up to 256 KiB (issue 37)');
  t.equal(dst.stream.writableLength, 256, 'at 256 one-byte writes queued in the sink');
  for (let i = 0; i < 50 && dst.bytes < 300; i++) {
    dst.release();
    await turn();
  }
  t.equal(dst.bytes, 300, 'every byte arrived once the sink took its writes');
  t.notOk(src.isPaused(), 'and the source reads again');
});

t.test('a source whose bytes and FIN were read before splice has its FIN passed on, on either relay', async (t) => {
  // A tunnel's first bytes are read from the held client (or the peer's stream) to go with the
  // CONNECT; when its FIN came in the same read, 'end' has fired before splice listens.
  for (const coalesceA of [false, true]) {
    const src = source();
    const dst = sink();
    src.push(KiB);
    src.push(null);
    t.equal((src.read() as Buffer).length, 1024, 'the first bytes taken by hand');
    await once(src, 'end');
    splice(src, dst.stream, () => {}, undefined, { coalesceA });
    await settle();
    t.ok(dst.finished, `the FIN reached the destination (${coalesceA ? 'coalescing' : 'plain'} relay)`);
    dst.stream.destroy();
    src.destroy();
  }
});
