import type { Duplex } from 'node:stream';
import { FramedSession } from '../tunnel-framing/framed-session.js';
import { WireError } from '../tunnel-framing/frames.js';
import type { GateError } from '../errors.js';
import { refusalDebugData } from './admission.js';

/**
 * Milliseconds a refused agent's or peer's socket is given to flush the GOAWAY that says why: a
 * refusal must reach the other end to be useful, but an end that never reads must not hold the
 * socket open.
 */
export const REFUSAL_FLUSH_MS = 2000;

/**
 * Refuses the other end of a tunnel or peering session (lib/tunnel-framing), started over `socket`
 * when not given, and says why: GOAWAY REFUSED_STREAM with the error's code and message as its
 * reason (readRefusalDebugData reads it), then this side's FIN. The socket is destroyed with
 * `error` once the other end has closed its side, or after REFUSAL_FLUSH_MS at the latest, so the
 * listener records the code.
 */
export function refuseFramed(socket: Duplex, error: GateError, session = new FramedSession(socket, { side: 'listener' })): void {
  const cut = (): void => {
    clearTimeout(timer);
    socket.destroy(error);
  };
  const timer = setTimeout(cut, REFUSAL_FLUSH_MS);
  timer.unref();
  socket.once('end', cut);
  socket.once('close', () => clearTimeout(timer));
  session.goAwayNow(WireError.REFUSED_STREAM, refusalDebugData(error).toString('latin1'), error, REFUSAL_FLUSH_MS * 2);
}
