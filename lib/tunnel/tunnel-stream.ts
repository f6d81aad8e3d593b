// A stream through an agent's tunnel, whichever protocol the tunnel speaks: an HTTP/2 CONNECT
// stream or a framed one (lib/tunnel-framing). What the proxy's paths need to tell of either:
// how to let it go, whether it ended cleanly, why not, and a Duplex for the paths that splice.
import type { ClientHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import { FramedDuplex } from '../tunnel-framing/framed-duplex.js';
import { releaseFramedStream } from '../tunnel-framing/framed-relay.js';
import { FramedStream } from '../tunnel-framing/framed-stream.js';
import { WireError, wireErrorName } from '../tunnel-framing/frames.js';
import { constants } from 'node:http2';
import { h2ErrorName } from './connect-request.js';
import { releaseStream } from './release-stream.js';

/** A stream through an agent's tunnel: an HTTP/2 CONNECT stream, or a framed one. */
export type TunnelStream = ClientHttp2Stream | FramedStream;

export function isFramedStream(stream: TunnelStream): stream is FramedStream {
  return stream instanceof FramedStream;
}

/** Lets go of a stream whose client has gone: a FIN, never a reset (release-stream.ts says why). */
export function releaseTunnelStream(stream: TunnelStream): void {
  if (isFramedStream(stream)) releaseFramedStream(stream);
  else releaseStream(stream);
}

/** True once `stream` has closed with a FIN both ways (no reset either way). */
export function closedCleanly(stream: TunnelStream): boolean {
  if (isFramedStream(stream)) return stream.closeCode === undefined || stream.closeCode === WireError.NO_ERROR;
  return stream.rstCode === constants.NGHTTP2_NO_ERROR && stream.readableEnded && stream.writableFinished;
}

/**
 * Says, when asked, why `stream` ended if it did not close cleanly: reset by the agent while its
 * tunnel is up, or the tunnel gone. Made while the stream is open: an HTTP/2 stream forgets its
 * session once closed, so the session is kept from now; a framed stream's reason says which.
 */
export function failureReason(stream: TunnelStream, agent: string): () => string {
  if (isFramedStream(stream)) {
    return () => {
      const code = wireErrorName(stream.closeCode ?? WireError.NO_ERROR);
      return `stream reset by the agent (${code})${stream.closeReason ? `: ${stream.closeReason}` : ''}`;
    };
  }
  const session = stream.session;
  return () =>
    session && !session.destroyed && !session.closed
      ? `stream reset by the agent (${h2ErrorName(stream.rstCode)})`
      : `agent ${agent} disconnected`;
}

/** The stream as a Duplex, for the paths that splice it to a socket or to another stream. */
export function tunnelDuplex(stream: TunnelStream): Duplex {
  return isFramedStream(stream) ? new FramedDuplex(stream) : stream;
}
