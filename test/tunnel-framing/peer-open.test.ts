// What a side does with the other side's OPEN (lib/tunnel-framing/peer-open.ts,
// docs/tunnel-framing.md "Violations", "Limits"): pure, each case and the order they are judged in.
import t from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import { FrameError, StreamFrameError, WireError } from '../../lib/tunnel-framing/frames.js';
import { judgeOpen, type OpenState } from '../../lib/tunnel-framing/peer-open.js';

const open = { kind: 0, target: 'x:1', client: '' };
const state: OpenState = { admitting: false, goingAway: false, held: 0, limit: 2, takes: true };
const malformed = new StreamFrameError(WireError.PROTOCOL_ERROR, 'an OPEN whose target, client or agent is not printable ASCII');

t.test('taken within the limit', async (t) => {
  t.same(judgeOpen(open, state), { take: open });
  t.same(judgeOpen(open, { ...state, held: 1 }), { take: open });
});

t.test('before admission any OPEN is a flood, malformed or not', async (t) => {
  for (const o of [open, malformed]) {
    const err = t.throws(() => judgeOpen(o, { ...state, admitting: true })) as FrameError;
    t.ok(err instanceof FrameError && err.wireCode === WireError.ENHANCE_YOUR_CALM && err.code === ErrorCodes.TUNNEL_FLOOD);
  }
});

t.test('going away: refused REFUSED_STREAM, not spent (the opener could not know)', async (t) => {
  t.same(judgeOpen(malformed, { ...state, goingAway: true }), {
    spends: false,
    code: WireError.REFUSED_STREAM,
    reason: 'the session is going away',
  });
});

t.test('malformed: reset with its own wire error and reason, spent', async (t) => {
  t.same(judgeOpen(malformed, state), { spends: true, code: WireError.PROTOCOL_ERROR, reason: malformed.message });
  t.same(judgeOpen(malformed, { ...state, takes: false }), { spends: true, code: WireError.PROTOCOL_ERROR, reason: malformed.message });
});

t.test('past the limit: REFUSED_STREAM, spent; a side that takes none answers 501, spent', async (t) => {
  t.same(judgeOpen(open, { ...state, held: 2 }), {
    spends: true,
    code: WireError.REFUSED_STREAM,
    reason: 'more than 2 concurrent streams',
  });
  t.same(judgeOpen(open, { ...state, limit: 0, held: 0, takes: false }), {
    spends: true,
    code: WireError.REFUSED_STREAM,
    reason: 'more than 0 concurrent streams',
  });
  t.same(judgeOpen(open, { ...state, takes: false }), {
    spends: true,
    answer: { status: 501, code: '', reason: 'this side takes no streams' },
  });
});
