/**
 * Streams one peering session may hold open at once: not a tunnel's 1,000 (settings.ts). That cap
 * bounds what one agent must carry; one peering session carries every forwarded connection between
 * two proxies, for all their agents, so it is bounded by the connection budget of the proxy that
 * accepts the clients (max_connections) rather than by a stream count of its own.
 */
export const PEER_MAX_STREAMS = 1 << 20;
