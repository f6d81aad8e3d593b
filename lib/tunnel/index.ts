/**
 * `gate-mux/tunnel`: reverse tunnels. Agents dial the proxy and hold one session over TLS, in
 * gate-mux's tunnel framing; the proxy opens a stream in it per client connection (client -> proxy -> agent -> resource).
 * docs/api/tunnel.md documents each name; parts not named here are in `gate-mux/internal`.
 */
export type { BackoffOptions } from './backoff.js';
export { startAgent, type AgentOptions, type TunnelAgent, type AgentConnectedEvent, type AgentTunnelInfo } from './agent.js';
export { DEFAULT_CONNECTION_COUNT } from './agent-pool.js';
export type { ClusterView } from './cluster-view.js';
export type { AgentDescription, AgentService, LastUpdate } from './agent-description.js';
export type { ServiceKind } from '../vocabulary/service-kinds.js';
export { TunnelRegistry, type TunnelRegistryOptions, type OpenStreamOptions, type DescribedAgent } from './registry.js';
export { viaTunnel, type ViaTunnelOptions, type TunnelStreamOpener } from './via-tunnel.js';
export type { RefusalChoice } from '../handlers/refuse.js';
export { releaseTunnelStream, tunnelDuplex, type TunnelStream } from './tunnel-stream.js';
export type { FramedStream, StreamSession } from '../tunnel-framing/framed-stream.js';
export type { AnswerPayload } from '../tunnel-framing/frames.js';
export type { DialCancel } from '../transport/dial-cancel.js';
export { tunnelEndpoint, tunnelRoute, type TunnelEndpointTls } from './endpoint.js';
export { parseTunnelUpstream, type TunnelUpstream } from '../vocabulary/tunnel-upstream.js';
export { LocalAgentSessions, type AgentSessions, type AgentSessionEntry } from './agent-sessions.js';
export { joinProxy, renewIdentity, fetchPinnedCa, type JoinEndpoint, type AgentIdentity } from './join-client.js';
