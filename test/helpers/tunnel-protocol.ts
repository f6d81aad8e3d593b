import type { TunnelProtocolChoice } from '../../lib/tunnel/agent-tunnel.js';

/**
 * The tunnel protocol the suites' agents offer: `auto` (the framing first, as agents do), or
 * `http2` when GATE_TEST_TUNNEL_PROTOCOL=http2, so that test/tunnel/http2-tunnels.test.ts can run
 * the same suites again on HTTP/2, the protocol agents of older releases speak.
 */
export function suiteTunnelProtocol(): { tunnelProtocol: TunnelProtocolChoice } {
  return { tunnelProtocol: process.env.GATE_TEST_TUNNEL_PROTOCOL === 'http2' ? 'http2' : 'auto' };
}
