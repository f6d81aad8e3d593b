import { constants, type ClientHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';

/** How long a released stream may take to finish cleanly before it is cancelled after all. */
export const RELEASE_GRACE_MS = 5_000;

/**
 * Lets go of a tunnel stream whose client has gone, with END_STREAM rather than RST_STREAM CANCEL.
 *
 * Why: clients that leave early are normal (probes, health checks, impatient users),
 * and resetting their streams made the agent's HTTP/2 stack count a stream cancel per client.
 * nghttp2 treats a stream of RST_STREAMs from its peer as the "rapid reset" attack
 * (CVE-2023-44487) and defends with ENHANCE_YOUR_CALM and GOAWAY, so one client's habit could
 * fail other clients' streams or the whole tunnel. A FIN is ordinary: the agent passes it to the
 * target (a half-close, RFC 9113 §8.5), the target closes, the agent ends its side, and the
 * stream closes with no reset in either direction. Until then whatever the agent still sends is
 * read and dropped, so flow control never stalls the tunnel; a target that ignores the FIN gets
 * its stream cancelled after `graceMs`.
 */
export function releaseStream(stream: ClientHttp2Stream | Duplex, graceMs = RELEASE_GRACE_MS): void {
  if (stream.destroyed) return;
  // The relay into the departed client would pause the stream on the first failed write.
  stream.removeAllListeners('data');
  stream.on('data', () => {});
  stream.resume();
  if (!stream.writableEnded) stream.end();
  const timer = setTimeout(() => {
    if (!stream.destroyed) {
      if ('close' in stream && typeof stream.close === 'function') (stream as ClientHttp2Stream).close(constants.NGHTTP2_CANCEL);
      else stream.destroy();
    }
  }, graceMs);
  timer.unref();
  stream.once('close', () => clearTimeout(timer));
}
