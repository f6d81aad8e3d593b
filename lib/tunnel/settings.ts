/**
 * Streams a proxy may hold open at once on one agent's tunnel, by default: the agent refuses an
 * open past it (FramedSession's `maxConcurrentStreams`). An agent given another (`maxStreams`)
 * says so in its HELLO, and the proxy keeps under what it said.
 */
export const TUNNEL_MAX_STREAMS = 1000;

/**
 * Streams the proxy keeps free below the agent's limit for its own: the describe stream (open for
 * the tunnel's life) and cluster views (one at a time, short-lived), with room to spare.
 */
export const TUNNEL_RESERVED_STREAMS = 4;

/**
 * The client streams the proxy opens at once through one tunnel of an agent whose limit is
 * `agentMaxStreams`, as its HELLO said (issue 37): below that limit, so the agent never has to
 * refuse an open of the proxy's (the session itself never opens past the limit either). An open it refuses counts against its rapid-reset budget, and past that budget it ends
 * the tunnel with ENHANCE_YOUR_CALM, every client through it with it: the surplus client is
 * refused at the proxy instead (GATE_ERR_AGENT_BUSY). At least 1.
 */
export function clientStreamCap(agentMaxStreams: number = TUNNEL_MAX_STREAMS): number {
  return Math.max(1, agentMaxStreams - TUNNEL_RESERVED_STREAMS);
}
