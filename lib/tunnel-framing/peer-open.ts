// What a side does with the other side's OPEN (docs/tunnel-framing.md, "Streams", "Violations",
// "Limits"): takes it, or refuses it (a RESET, or ANSWER 501 from a side that takes no streams),
// and whether the refusal spends the reset budget. Pure: framed-session.ts sends the refusal.
import type { AnswerPayload, OpenPayload } from './frames.js';
import { floodError, StreamFrameError, WireError } from './frames.js';

/** The session's state an OPEN is judged against. */
export interface OpenState {
  /** The other side is not admitted yet: any OPEN is a flood. */
  admitting: boolean;
  /** This side sent GOAWAY. */
  goingAway: boolean;
  /** The other side's streams the limit counts now, and the limit. */
  held: number;
  limit: number;
  /** This side takes streams at all (it has an `onOpen`). */
  takes: boolean;
}

/** A refused OPEN: a RESET (`code`, `reason`) or an ANSWER; `spends`: it costs the reset budget. */
export type OpenRefusal = { spends: boolean } & ({ code: number; reason: string } | { answer: AnswerPayload });

/** An OPEN taken (`take`: what it asks for), or refused. */
export type OpenVerdict = { take: OpenPayload } | OpenRefusal;

/**
 * Whether `open` (decoded, or its stream error) is taken, or how it is refused. Throws the
 * flood error of an OPEN before admission. A refusal the opener could have avoided (malformed,
 * past the limit, to a side that takes none) spends the reset budget, as a flood of them would be
 * a flood of resets; one refused because this side is going away does not.
 */
export function judgeOpen(open: OpenPayload | StreamFrameError, state: OpenState): OpenVerdict {
  if (state.admitting) throw floodError('an OPEN before the session was admitted');
  if (state.goingAway) return { spends: false, code: WireError.REFUSED_STREAM, reason: 'the session is going away' };
  if (open instanceof StreamFrameError) return { spends: true, code: open.wireCode, reason: open.message };
  if (state.held >= state.limit)
    return { spends: true, code: WireError.REFUSED_STREAM, reason: `more than ${state.limit} concurrent streams` };
  if (!state.takes) return { spends: true, answer: { status: 501, code: '', reason: 'this side takes no streams' } };
  return { take: open };
}
