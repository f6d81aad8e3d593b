// A session's connection-level flow control (lib/tunnel-framing/connection-credit.ts,
// docs/tunnel-framing.md "Flow control"): credit both ways, returned at half the window, bounded
// at 2^31-1, and the streams waiting for it woken while it lasts. Pure bookkeeping, no socket.
import t from 'tap';
import { ConnectionCredit } from '../../lib/tunnel-framing/connection-credit.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { FrameError, WireError } from '../../lib/tunnel-framing/frames.js';

/** A waiting stream that spends `each` of the credit when woken, as a stream sending would. */
function waiter(credit: ConnectionCredit, woken: string[], name: string, each: number): FramedStream {
  return {
    creditArrived: () => {
      woken.push(name);
      credit.spend(each);
    },
  } as unknown as FramedStream;
}

t.test('no credit before the HELLO; the HELLO grants its window, a WINDOW adds, and past 2^31-1 is FLOW_CONTROL_ERROR', async (t) => {
  const credit = new ConnectionCredit(1000, () => false);
  t.equal(credit.sendable, 0);
  credit.granted(100);
  t.equal(credit.sendable, 100);
  credit.spend(60);
  credit.added(10);
  t.equal(credit.sendable, 50);
  const err = t.throws(() => credit.added(0x7fffffff)) as FrameError;
  t.ok(err instanceof FrameError && err.wireCode === WireError.FLOW_CONTROL_ERROR, 'credit past 2^31-1');
});

t.test('nothing is sendable while the output is full', async (t) => {
  let full = true;
  const credit = new ConnectionCredit(1000, () => full);
  credit.granted(100);
  t.equal(credit.sendable, 0);
  full = false;
  t.equal(credit.sendable, 100);
});

t.test('the other side may send its window; credit goes back once half of it is read', async (t) => {
  const credit = new ConnectionCredit(1000, () => false);
  credit.received(1000);
  const err = t.throws(() => credit.received(1)) as FrameError;
  t.equal(err.wireCode, WireError.FLOW_CONTROL_ERROR, 'one byte past the window');
  t.equal(credit.consumed(499), 0, 'less than half: nothing returned yet');
  t.equal(credit.consumed(1), 500, 'half: all that was read is returned');
  t.doesNotThrow(() => credit.received(500), 'and may be sent again');
  t.throws(() => credit.received(1));
});

t.test('waiting streams are woken in turn while the credit lasts, the rest wait on', async (t) => {
  const credit = new ConnectionCredit(1000, () => false);
  const woken: string[] = [];
  for (const name of ['a', 'b', 'c']) credit.wait(waiter(credit, woken, name, 50));
  credit.granted(100);
  credit.wake();
  t.same(woken, ['a', 'b'], 'c waits: the credit is spent');
  credit.added(10);
  t.same(woken, ['a', 'b', 'c']);
  const gone = waiter(credit, woken, 'gone', 1);
  credit.wait(gone);
  credit.forget(gone);
  credit.added(10);
  t.same(woken, ['a', 'b', 'c'], 'a stream forgotten is not woken');
});
