// The other side's frames after its HELLO, told apart by type and decoded, with the checks that
// need nothing of the session's state (a GOAWAY or PING on a stream, a second HELLO, a PING's
// size). framed-session.ts acts on each (docs/tunnel-framing.md, "Frame types", "Violations").
import {
  decodeGoAway,
  decodeReset,
  decodeWindow,
  FLAG_ACK,
  FrameError,
  FrameType,
  type GoAwayPayload,
  type ResetPayload,
  WireError,
} from './frames.js';

/** What a session does with each kind of frame of the other side's. */
export interface PeerFrames {
  data(id: number, flags: number, payload: Buffer): void;
  /** An OPEN, undecoded: its id is checked before its payload. */
  open(id: number, payload: Buffer): void;
  /** An ANSWER, undecoded: whether the stream may be answered is checked before its payload. */
  answer(id: number, payload: Buffer): void;
  window(id: number, increment: number): void;
  reset(id: number, reset: ResetPayload): void;
  goAway(goAway: GoAwayPayload): void;
  /** A PING (echoed) or its ACK: the 8 bytes it carries. */
  ping(ack: boolean, payload: Buffer): void;
  /** A frame type of a later version. */
  unknown(): void;
}

/** Hands one frame (read after the HELLO) to `to`; throws the FrameError of one that breaks the framing. */
export function dispatchPeerFrame(to: PeerFrames, type: number, flags: number, id: number, payload: Buffer): void {
  switch (type) {
    case FrameType.DATA:
      return to.data(id, flags, payload);
    case FrameType.OPEN:
      return to.open(id, payload);
    case FrameType.ANSWER:
      return to.answer(id, payload);
    case FrameType.WINDOW:
      return to.window(id, decodeWindow(payload));
    case FrameType.RESET:
      return to.reset(id, decodeReset(payload));
    case FrameType.GOAWAY:
      if (id !== 0) throw new FrameError(WireError.PROTOCOL_ERROR, `a GOAWAY on stream ${id}`);
      return to.goAway(decodeGoAway(payload));
    case FrameType.PING:
      if (id !== 0 || payload.length !== 8)
        throw new FrameError(WireError.FRAME_SIZE_ERROR, `a PING of ${payload.length} bytes on stream ${id}`);
      return to.ping((flags & FLAG_ACK) !== 0, payload);
    case FrameType.HELLO:
      throw new FrameError(WireError.PROTOCOL_ERROR, 'a second HELLO');
    default:
      // A frame type of a later version: ignored, as HTTP/2 ignores unknown frames (RFC 9113 §4.1),
      // but not without end: it is work that carries nothing.
      return to.unknown();
  }
}
