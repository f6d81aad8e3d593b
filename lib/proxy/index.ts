/**
 * `gate-mux/proxy`: the platform's front door built from the multiplexer — a YAML configuration
 * turned into listeners, routes and handlers (`GateProxy`), its certificates, and the web
 * endpoints it serves (`/webapi/ping`, the automatic-upgrade version channels).
 */
export { GateProxy, type GateProxyOptions } from './gate-proxy.js';
export { loadProxyCertificates, type ProxyCertificates } from './certificates.js';
export { planListeners, routeMatchFor, routeMatchesFor, type ListenerPlan, type ListenerSpec, type RouteSpec, type RouteTransport, type RouteFraming } from './listener-plan.js';
export { routeFor, type WebServers, type RouteForOptions } from './route-handlers.js';
export { agentJoinHint, agentsInConfig, type JoinHintOptions } from './join-hint.js';

// Health and metrics (`diag_addr`: /healthz, /readyz, /metrics)
export { GateMetrics, type MetricSources, type PeerDialOutcome } from '../cluster/metrics.js';
export { DiagServer, DIAG_PATHS, type DiagServerOptions } from '../cluster/diag-server.js';
export {
  clusterReadiness,
  listenersReadiness,
  readinessOf,
  type ClusterMemberView,
  type ListenerState,
  type Readiness,
  type ReadinessReport,
  type ReadinessSource,
} from '../cluster/readiness.js';

// Configuration (YAML)
export { parseConfig, loadConfig, ConfigError, type ConfigProblem, type ParseConfigOptions } from '../config/load.js';
export { parseAddress, formatAddress, type HostPort, type ParseAddressResult } from '../config/address.js';
export { parseDuration } from '../config/duration.js';
export { LEGACY_PORTS, listenAddressFor } from '../config/listen-addresses.js';
export { UPSTREAM_PROTOCOLS, type GateConfig, type LoadedConfig, type ListenerMode, type ProxyServiceConfig, type KeyPairFiles, type UpstreamProtocol, type ProxyProtocolName } from '../config/types.js';
export { type ChannelConfig } from '../config/channel.js';

// Web endpoints
export { buildPing } from './ping.js';
export type { PingResponse } from '../web/ping.js';
export { VersionChannels, DEFAULT_CHANNEL, type VersionChannelsOptions, type FetchText, type FetchTextResult as ChannelFetchResult } from '../web/version-channels.js';
export { parseChannelPath, type ChannelPath } from '../web/channel-path.js';
export { createWebRoutes, WebErrorCodes, type WebRequestHandler, type WebRoutesOptions } from '../web/routes.js';
