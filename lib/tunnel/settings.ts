import type { Settings } from 'node:http2';

/**
 * HTTP/2 flow-control sizes for tunnels. RFC 9113 §6.9.2's defaults (64 KiB per stream and per
 * connection) cap one stream at 64 KiB per round trip, far below what a database dump through a
 * WAN tunnel needs; a 1 MiB stream window and a 16 MiB connection window let bulk streams run while
 * still bounding what one slow client can make the other side buffer.
 */
export const TUNNEL_STREAM_WINDOW_BYTES = 1 << 20;
export const TUNNEL_WINDOW_BYTES = 16 << 20;

export const TUNNEL_SESSION_SETTINGS: Settings = {
  enablePush: false,
  initialWindowSize: TUNNEL_STREAM_WINDOW_BYTES,
  maxConcurrentStreams: 1000,
};
