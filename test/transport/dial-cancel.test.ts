// DialCancel: what the tunnel's handlers cancel a dial with when its client leaves, in place of an
// AbortController per connection. Its callers rely on: every waiter told once, a waiter that left
// never told, a signal only when asked for and then aborted with the same reason, and a caller's
// own controller (the local proxy's, aborted when it closes) and the cancel acting as one.
import t from 'tap';
import { cancelReason, DialCancel, stopWaiting, whenCancelled } from '../../lib/transport/dial-cancel.js';

t.test('each waiter is told once, with the reason; one that left is not told', async (t) => {
  const cancel = new DialCancel();
  const told: string[] = [];
  const first = (why: unknown): number => told.push(`first ${(why as Error).message}`);
  const second = (why: unknown): number => told.push(`second ${(why as Error).message}`);
  const gone = (): number => told.push('gone');
  cancel.onCancel(first);
  cancel.onCancel(gone);
  cancel.onCancel(second);
  cancel.offCancel(gone);
  t.equal(cancel.cancelled, false);
  cancel.cancel(new Error('client closed'));
  cancel.cancel(new Error('again'));
  t.same(told, ['first client closed', 'second client closed']);
  t.equal(cancel.cancelled, true);
  t.equal((cancel.reason as Error).message, 'client closed', 'the first reason stays');
  cancel.onCancel((why) => told.push(`late ${(why as Error).message}`));
  t.same(told.at(-1), 'late client closed', 'a waiter that comes after the cancel is told at once');
});

t.test('the one waiter in the slot, once it left, is not told either', async (t) => {
  const cancel = new DialCancel();
  let told = 0;
  const waiter = (): number => ++told;
  cancel.onCancel(waiter);
  cancel.offCancel(waiter);
  cancel.cancel(new Error('x'));
  t.equal(told, 0);
});

t.test('a signal is made when asked for, aborted with the reason, before or after the cancel', async (t) => {
  const before = new DialCancel();
  const signal = before.signal;
  t.equal(signal.aborted, false);
  t.equal(before.signal, signal, 'the same signal each time');
  before.cancel(new Error('client closed'));
  t.equal(signal.aborted, true);
  t.equal((signal.reason as Error).message, 'client closed');

  const after = new DialCancel();
  after.cancel(new Error('peer stream closed'));
  t.equal(after.signal.aborted, true, 'asked for after the cancel: already aborted');
  t.equal((after.signal.reason as Error).message, 'peer stream closed');
});

t.test("a caller's own controller and the cancel act as one", async (t) => {
  const outside = new AbortController();
  const cancel = new DialCancel(outside);
  let told: unknown;
  cancel.onCancel((why) => (told = why));
  t.equal(cancel.signal, outside.signal, "the caller's signal is the cancel's");
  outside.abort(new Error('listener closing'));
  t.equal((told as Error).message, 'listener closing', 'aborting it cancels');

  const other = new AbortController();
  new DialCancel(other).cancel(new Error('client closed'));
  t.equal((other.signal.reason as Error).message, 'client closed', 'cancelling aborts it');

  const already = new AbortController();
  already.abort('stopped');
  const late = new DialCancel(already);
  t.equal(late.cancelled, true, 'an aborted controller: cancelled from the start');
  t.equal(late.reason, 'stopped', 'with its reason as it was');
});

t.test('whenCancelled: a DialCancel or an AbortSignal, now or later, and stopWaiting', async (t) => {
  const heard: unknown[] = [];
  const hearing =
    (cancel: DialCancel | AbortSignal): (() => void) =>
    () =>
      void heard.push(cancelReason(cancel));

  const later = new DialCancel();
  whenCancelled(later, hearing(later));
  later.cancel('left');
  const forgotten = new DialCancel();
  const forgottenListener = hearing(forgotten);
  whenCancelled(forgotten, forgottenListener);
  stopWaiting(forgotten, forgottenListener);
  forgotten.cancel('not heard');
  const already = new DialCancel();
  already.cancel('before');
  whenCancelled(already, hearing(already));
  t.same(heard.splice(0), ['left', 'before'], 'a DialCancel: later, already, and not once forgotten');

  const controller = new AbortController();
  whenCancelled(controller.signal, hearing(controller.signal));
  controller.abort('aborted');
  const other = new AbortController();
  const otherListener = hearing(other.signal);
  whenCancelled(other.signal, otherListener);
  stopWaiting(other.signal, otherListener);
  other.abort('not heard');
  const at = AbortSignal.abort('at once');
  whenCancelled(at, hearing(at));
  t.same(heard.splice(0), ['aborted', 'at once'], 'an AbortSignal: later, already, and not once forgotten');

  t.doesNotThrow(() => {
    const nothing = (): void => void heard.push('never');
    whenCancelled(undefined, nothing);
    stopWaiting(undefined, nothing);
  }, 'nothing to wait on');
  t.same(heard, []);
  t.equal(cancelReason(undefined), undefined);
});
