// A stream through an agent's tunnel (lib/tunnel-framing), as the proxy's paths see it: how to let
// it go, whether it ended cleanly, why not, and a Duplex for the paths that splice.
import type { Duplex } from 'node:stream';
import { FramedDuplex } from '../tunnel-framing/framed-duplex.js';
import { releaseFramedStream } from '../tunnel-framing/framed-relay.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import { WireError, wireErrorName } from '../tunnel-framing/frames.js';

/** A stream through an agent's tunnel, or through a peer proxy to one. */
export type TunnelStream = FramedStream;

/**
 * Lets go of a stream whose client has gone: a FIN, never a reset. Clients that leave early are
 * normal (probes, health checks, impatient users); a reset would spend the agent's rapid-reset
 * budget (framed-session.ts), so one client's habit could end the tunnel for every other.
 */
export function releaseTunnelStream(stream: TunnelStream): void {
  releaseFramedStream(stream);
}

/** True once `stream` has closed with a FIN both ways (no reset either way). */
export function closedCleanly(stream: TunnelStream): boolean {
  return stream.closeCode === undefined || stream.closeCode === WireError.NO_ERROR;
}

/** Says, when asked, why `stream` ended if it did not close cleanly: its reset's code and reason. */
export function failureReason(stream: TunnelStream): () => string {
  return () => {
    const code = wireErrorName(stream.closeCode ?? WireError.NO_ERROR);
    return `stream reset by the agent (${code})${stream.closeReason ? `: ${stream.closeReason}` : ''}`;
  };
}

/** The stream as a Duplex, for the paths that splice it to a socket or to another stream. */
export function tunnelDuplex(stream: TunnelStream): Duplex {
  return new FramedDuplex(stream);
}
