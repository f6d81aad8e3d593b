// What a framed session is configured with, and the defaults: the windows and the stream limit
// it tells the other side in its HELLO, and its budgets against the other side
// (docs/tunnel-framing.md, "Limits").
import type { AdmissionLimits } from './flood-budgets.js';
import type { FramedStream } from './framed-stream.js';
import type { OpenPayload } from './frames.js';

export interface FramedSessionOptions {
  /**
   * Which end of the connection this is. The dialer opens odd-numbered streams, the listener
   * even-numbered ones, so both may open without choosing the same id.
   */
  side: 'dialer' | 'listener';
  /**
   * A stream the other side opened: answer it (`stream.respond`) when its target is reached or
   * refused. Without it every open is refused with 501 (and the HELLO says 0 streams).
   */
  onOpen?: (stream: FramedStream, open: OpenPayload) => void;
  /** Streams the other side may hold open at once; opens past it are reset REFUSED_STREAM (default 1000). */
  maxConcurrentStreams?: number;
  /**
   * Streams the other side may reset before this side answered them (or have refused) in a burst,
   * and how fast that budget comes back per second: past it the session ends with
   * ENHANCE_YOUR_CALM, as nghttp2 does against a rapid-reset flood (its defaults: 1000, 33 per
   * second). See FloodBudgets.spendReset for what counts.
   */
  resetBurst?: number;
  resetsPerSecond?: number;
  /**
   * The windows this side gives the other (defaults: 1 MiB per stream and 16 MiB per connection),
   * told to it in this side's HELLO. What this side may send is what the other side's HELLO says.
   */
  streamWindow?: number;
  connectionWindow?: number;
  /**
   * The other side is not admitted yet (an agent that has not described itself): until `admit()`
   * it may do almost nothing (docs/tunnel-framing.md, "Limits"). Past any bound the session ends
   * with GOAWAY ENHANCE_YOUR_CALM (GATE_ERR_TUNNEL_FLOOD).
   */
  untilAdmitted?: AdmissionLimits;
  /**
   * The first stream id this side opens (default 1 for the dialer, 2 for the listener). Tests set
   * it near 2^31-1 to see a session run out of ids; nothing else needs it.
   */
  firstStreamId?: number;
}

/**
 * The windows: 1 MiB per stream and 16 MiB per connection, the sizes the HTTP/2 tunnel uses
 * (lib/tunnel/settings.ts), for the same reason: a bulk stream through a WAN tunnel needs more
 * than 64 KiB per round trip, and one slow reader must not make the other side buffer without end.
 */
export const DEFAULT_STREAM_WINDOW = 1 << 20;
export const DEFAULT_CONNECTION_WINDOW = 16 << 20;

/** Streams the other side may hold open at once, unless told otherwise (HTTP/2's usual 1000). */
export const DEFAULT_MAX_STREAMS = 1000;
