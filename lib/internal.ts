/**
 * `gate-mux/internal`: the building blocks behind the public entry points — parsers, budgets,
 * framing, the proxy's listener plan, cluster peering, agent admission and the like. They are
 * exported for gate-mux's own tools, benches and for experiments; they are NOT a stable API and
 * may change or disappear in any release (docs/api/internal.md). Prefer the public entry points.
 */

// The multiplexer's parts
export { DEFAULT_MAX_HELLO_BYTES } from './mux/multiplexer.js';
export { RouteTable, type RouteQuery } from './mux/route-table.js';
export { DEFAULT_HIGH_WATER, DEFAULT_SOURCE_SHARE } from './mux/connection-budget.js';
export { connectionCapFor, processDescriptorCap, softOpenFilesLimit, type DescriptorCap } from './mux/descriptor-limit.js';
export { LogLimiter, type LogLimiterOptions } from './log-limiter.js';
export { FAST_PATH_ENV } from './transport/self-test.js';
export { NATIVE_RELAY_ENV, NATIVE_SPLICE_ENV } from './transport/native-relay.js';
export { parseHostPort } from './handlers/builders.js';
export { tlsAlertRecord, TlsAlert } from './tls/alert.js';
export { PingFrameDecoder, lengthPrefix, PING_FRAME } from './length-prefix/ping-frames.js';
export { PingFramedStream, DEFAULT_PING_INTERVAL_MS } from './length-prefix/ping-stream.js';

// Client-side pieces
export { parseTarget, formatHostPort } from './client/target.js';
export { parseNoProxy, noProxyMatches, isLoopbackHost, type NoProxyRules, type DomainRule } from './client/no-proxy.js';
export { readProxyEnv } from './client/env-proxy.js';
export { parseProxyUrl, redactProxyValue, DEFAULT_PROXY_PORTS } from './client/proxy-config.js';
export { parseConnectResponse, DEFAULT_MAX_CONNECT_HEADER_BYTES, type ConnectResponseParse } from './client/connect-response.js';
export { forcedUpgrade, UpgradeDecisions, upgradeDecisions, UPGRADE_DECISION_TTL_MS } from './client/upgrade-decision.js';
export { proxyUrlFor } from './client/http-agent.js';

// The connection upgrade's client handshake, framing and pure checks
export { DEFAULT_UPGRADE_PING_INTERVAL_MS } from './conn-upgrade/upgrade-server.js';
export { openUpgrade, type OpenUpgradeOptions } from './conn-upgrade/upgrade-client.js';
export {
  WebSocketStream,
  SEND_MESSAGE_BYTES,
  DEFAULT_MAX_MESSAGE_BYTES,
  type WebSocketStreamOptions,
} from './conn-upgrade/websocket-stream.js';
export {
  checkUpgradeRequest,
  forwardedFor,
  isConnectionUpgradePath,
  type UpgradeCheck,
  type UpgradeProtocol,
  type UpgradeRequestHead,
  type ForwardedFor,
} from './conn-upgrade/upgrade-request.js';

// The proxy's parts
export { loadProxyCertificates, type ProxyCertificates } from './proxy/certificates.js';
export { proxyParts, type ProxyParts } from './proxy/proxy-parts.js';
export {
  planListeners,
  routeMatchFor,
  routeMatchesFor,
  type ListenerPlan,
  type ListenerSpec,
  type RouteSpec,
  type RouteTransport,
  type RouteFraming,
} from './proxy/listener-plan.js';
export { routeFor, type WebServers, type RouteForOptions } from './proxy/route-handlers.js';
export { agentJoinHint, agentsInConfig, type JoinHintOptions } from './proxy/join-hint.js';
export { buildPing } from './proxy/ping.js';
export { parseDuration } from './config/duration.js';
export { LEGACY_PORTS, listenAddressFor } from './config/listen-addresses.js';
export { UPSTREAM_PROTOCOLS } from './config/types.js';
export { parseChannelPath, type ChannelPath } from './web/channel-path.js';
export { GateMetrics, type MetricSources, type PeerDialOutcome } from './cluster/metrics.js';
export { DiagServer, DIAG_PATHS, type DiagServerOptions } from './cluster/diag-server.js';
export {
  clusterReadiness,
  listenersReadiness,
  readinessOf,
  type ClusterMemberView,
  type ListenerState,
  type Readiness,
  type ReadinessReport,
  type ReadinessSource,
} from './cluster/readiness.js';

// Certificates
export { parseCaPin } from './pki/ca-pin.js';
export {
  buildRequest,
  createKeyAndRequest,
  verifyRequest,
  type AgentKeyType,
  type KeyAndRequest,
  type VerifiedRequest,
} from './pki/certificate-request.js';
export { AGENT_KEY_POLICY } from './pki/agent-key-policy.js';

// Reverse tunnels' parts
export { AgentPool, RedialSchedule, type DialOutcome, type PoolTunnel } from './tunnel/agent-pool.js';
export { normalizeClusterView } from './tunnel/cluster-view.js';
export type { TunnelStreamOpener } from './tunnel/via-tunnel.js';
export { isTunnelUpstream } from './vocabulary/tunnel-upstream.js';
export { agentNameOf, commonNameOfSubject, type CertificateNames } from './tunnel/agent-identity.js';
export { isValidAgentName } from './vocabulary/agent-name.js';
export { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from './tunnel/backoff.js';
export { startHeartbeat, DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TIMEOUT_MS, type HeartbeatOptions } from './tunnel/heartbeat.js';
export { statusForCode } from './tunnel/refusal-status.js';
export { admitAgent, type AgentTlsFacts } from './tunnel/admission.js';
export { renewalTime } from './tunnel/join-client.js';
export { AgentAuthority, type AgentAuthorityOptions, type IssuedAgentCertificate } from './tunnel/agent-authority.js';
export { JoinTokens } from './tunnel/join-tokens.js';
export type { JoinTokenRule } from './vocabulary/join-token-rule.js';
export { readAgentState, writeAgentState, type StoredIdentity } from './tunnel/agent-state.js';

// The updater's parts
export { formatVersion } from './vocabulary/semver.js';
export { parseWeekday, WEEKDAY_NAMES, MAINTENANCE_CONFIG_KIND } from './updater/maintenance-config.js';
export { WINDOW_MS } from './updater/maintenance-window.js';
export { channelVersionUrl, channelCriticalUrl } from './updater/target-version.js';
export { schedulePath, scheduleUrl, DEFAULT_SCHEDULE_PATH, SCHEDULE_PATH_ENV } from './updater/schedule.js';
export { splitCommandLine, commandWithVersion } from './updater/command-line.js';

// Several proxies: membership and peering
export {
  ClusterMember,
  type ClusterMemberOptions,
  type ChannelMismatch,
  type StoreOperation,
  type TunnelEvents,
} from './cluster/cluster-member.js';
export { channelFingerprint } from './cluster/channel-fingerprint.js';
export { PeerServer, type PeerServerOptions, type PeerEndpointTls } from './cluster/peer-server.js';
export { PeerPool, type PeerPoolOptions, type PeerIdentity, type PeerAddress } from './cluster/peer-pool.js';
export { ClusterDialer, type ClusterDialerOptions, type DialerMembership, type PeerOpener } from './cluster/cluster-dialer.js';
export { admitPeer, hasProxyRole, peerTlsFacts, type PeerTlsFacts } from './cluster/peer-identity.js';
