// Two framed streams joined, frame by frame: the holder's hop, where a peering stream is carried
// into a stream of the agent's tunnel, with nothing but the framing on either side.
import type { FramedStream } from './framed-stream.js';

/**
 * `from`'s bytes written to `to`; `from` is paused while `to` has no credit (its write returns
 * false) and resumed at `to`'s 'drain', so what is held between them is bounded by one stream's
 * window. `from`'s FIN becomes `to`'s.
 */
export function framedOneWay(from: FramedStream, to: FramedStream): void {
  const resume = (): void => from.resume();
  from.on('data', (chunk: Buffer) => {
    if (!to.write(chunk)) {
      from.pause();
      to.once('drain', resume);
    }
  });
  from.once('end', () => to.end());
}

/**
 * Joins an opener's stream (`inbound`, on the peering session) to the stream opened for it on the
 * agent's tunnel (`onward`):
 *
 * - the opener's bytes go on at once, before the agent's answer, as they came (the agent holds
 *   them until it has dialled);
 * - the agent's answer is given back as it came: its status, its GATE_ERR_* code, its reason;
 * - on 200 the agent's bytes flow back too, each way with its own backpressure and FIN;
 * - a reset on either side resets the other with the same code and reason, so neither outlives
 *   the other.
 */
export function spliceFramed(inbound: FramedStream, onward: FramedStream): void {
  framedOneWay(inbound, onward);
  onward.once('response', (answer) => {
    inbound.respond(answer);
    if (answer.status !== 200) return;
    framedOneWay(onward, inbound);
    onward.resume();
  });
  passResets(inbound, onward);
  inbound.resume();
}

/**
 * Joins two streams both ways whose opening is done: the holder's hop once the agent has answered
 * (`onward`) and the opener has been told (`inbound`). Each way has its own backpressure and FIN,
 * and a reset on either side resets the other with the same code and reason.
 */
export function joinFramed(inbound: FramedStream, onward: FramedStream): void {
  framedOneWay(inbound, onward);
  framedOneWay(onward, inbound);
  passResets(inbound, onward);
  inbound.resume();
  onward.resume();
}

/** A reset the other side of `a` or `b` made is passed on to the other stream. */
function passResets(a: FramedStream, b: FramedStream): void {
  // Only what the other side did is passed on (a reset, its session gone): a close this side
  // made (a refusal passed back, a reset passed on) is already known to both.
  b.once('close', () => {
    if (b.closeCode !== undefined && b.closedByPeer) a.reset(b.closeCode, b.closeReason);
  });
  a.once('close', () => {
    if (a.closeCode !== undefined && a.closedByPeer) b.reset(a.closeCode, a.closeReason);
  });
}
