import { TUNNEL_SESSION_SETTINGS } from '../tunnel/settings.js';

/**
 * The peering session's settings: the tunnels' windows, but not their 1,000-stream cap. That cap
 * bounds what one agent must carry; one peering session carries every forwarded connection
 * between two proxies, for all their agents, so it is bounded by the connection budget of the
 * proxy that accepts the clients (max_connections) rather than by a stream count of its own.
 */
export const PEER_SESSION_SETTINGS = { ...TUNNEL_SESSION_SETTINGS, maxConcurrentStreams: 1 << 20 };
