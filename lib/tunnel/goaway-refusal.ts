import { constants, type Http2Session } from 'node:http2';
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
 * Refuses the other end of `session` (an agent's tunnel, a peer proxy's session) and says why:
 * GOAWAY REFUSED_STREAM with the error's code and message as debug data (readRefusalDebugData
 * reads it), then the session closes once the frame is written. `socket` is destroyed with the
 * error when the session closes, or after REFUSAL_FLUSH_MS at the latest, so the listener records
 * the code. `onceConnected` for a client session that was just started over the socket: its
 * GOAWAY is sent once it is connected.
 */
export function refuseWithGoAway(session: Http2Session, socket: Duplex, error: GateError, options: { onceConnected?: boolean } = {}): void {
  const timer = setTimeout(() => socket.destroy(error), REFUSAL_FLUSH_MS);
  timer.unref();
  session.once('close', () => {
    clearTimeout(timer);
    socket.destroy(error);
  });
  const send = (): void => {
    if (session.closed || session.destroyed) return;
    session.goaway(constants.NGHTTP2_REFUSED_STREAM, 0, refusalDebugData(error));
    // close() after goaway(): no stream will open, so the session ends once the frame is written.
    session.close();
  };
  if (options.onceConnected) session.once('connect', send);
  else send();
}

/**
 * The same for a framed session (lib/tunnel-framing), started over `socket` when not given: GOAWAY
 * REFUSED_STREAM with the refusal as its reason (the same text as HTTP/2's debug data), then this
 * side's FIN. The socket is destroyed with `error` once the other end has closed its side, or after
 * REFUSAL_FLUSH_MS at the latest.
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
