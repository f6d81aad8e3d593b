// Reverse tunnels: agents dial the proxy and hold one HTTP/2 session over TLS; the proxy opens a
// CONNECT stream in it per client connection (client -> proxy -> agent -> resource).
export { startAgent, type AgentOptions, type TunnelAgent, type AgentConnectedEvent, type AgentTunnelInfo } from './agent.js';
export { AgentPool, RedialSchedule, DEFAULT_CONNECTION_COUNT, type DialOutcome, type PoolTunnel } from './agent-pool.js';
export { normalizeClusterView, readClusterView, type ClusterView } from './cluster-view.js';
export { TunnelRegistry, type TunnelRegistryOptions, type OpenStreamOptions } from './registry.js';
export { viaTunnel, type ViaTunnelOptions, type TunnelStreamOpener } from './via-tunnel.js';
export { tunnelEndpoint, tunnelRoute, type TunnelEndpointTls } from './endpoint.js';
export { parseTunnelUpstream, isTunnelUpstream, type TunnelUpstream } from './tunnel-upstream.js';
export { agentNameOf, isValidAgentName, commonNameOfSubject, type CertificateNames } from './agent-identity.js';
export { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from './backoff.js';
export { startHeartbeat, DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, type HeartbeatOptions } from './heartbeat.js';
export { ERROR_CODE_HEADER, ERROR_MESSAGE_HEADER, statusForCode, readRefusal } from './connect-request.js';
export { LocalAgentSessions, type AgentSessions, type AgentSessionEntry } from './agent-sessions.js';
export { admitAgent, type AgentTlsFacts } from './admission.js';
export { joinProxy, renewIdentity, fetchPinnedCa, renewalTime, type JoinEndpoint, type AgentIdentity } from './join-client.js';
export { AgentAuthority, type AgentAuthorityOptions, type IssuedAgentCertificate } from './agent-authority.js';
export { JoinTokens, type JoinTokenRule } from './join-tokens.js';
export { readAgentState, writeAgentState, type StoredIdentity } from './agent-state.js';
export { releaseStream, RELEASE_GRACE_MS } from './release-stream.js';
