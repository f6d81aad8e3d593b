import type { Settings } from 'node:http2';

/**
 * HTTP/2 flow-control sizes for tunnels. RFC 9113 §6.9.2's defaults (64 KiB per stream and per
 * connection) cap one stream at 64 KiB per round trip, far below what a database dump through a
 * WAN tunnel needs; a 1 MiB stream window and a 16 MiB connection window let bulk streams run while
 * still bounding what one slow client can make the other side buffer.
 */
export const TUNNEL_STREAM_WINDOW_BYTES = 1 << 20;
export const TUNNEL_WINDOW_BYTES = 16 << 20;

/**
 * Streams a proxy may hold open at once on one agent's tunnel: the agent refuses an open past it
 * (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS; the framing's fixed limit, FramedSession's
 * `maxConcurrentStreams`). The proxy and the agent are built together, so the proxy assumes it
 * rather than learning it; both take it as an option (`maxStreams`, `agentMaxStreams`), to be set
 * alike, for tests that need a small one.
 */
export const TUNNEL_MAX_STREAMS = 1000;

/**
 * Streams the proxy keeps free below the agent's limit for its own: the describe stream (open for
 * the tunnel's life) and cluster views (one at a time, short-lived), with room to spare.
 */
export const TUNNEL_RESERVED_STREAMS = 4;

/**
 * The client streams the proxy opens at once through one tunnel of an agent whose limit is
 * `agentMaxStreams` (issue 37): below that limit, so the agent never has to refuse an open of the
 * proxy's. An open it refuses counts against its rapid-reset budget, and past that budget it ends
 * the tunnel with ENHANCE_YOUR_CALM, every client through it with it: the surplus client is
 * refused at the proxy instead (GATE_ERR_AGENT_BUSY). At least 1.
 */
export function clientStreamCap(agentMaxStreams: number = TUNNEL_MAX_STREAMS): number {
  return Math.max(1, agentMaxStreams - TUNNEL_RESERVED_STREAMS);
}

export const TUNNEL_SESSION_SETTINGS: Settings = {
  enablePush: false,
  initialWindowSize: TUNNEL_STREAM_WINDOW_BYTES,
  maxConcurrentStreams: TUNNEL_MAX_STREAMS,
};
