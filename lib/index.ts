// Public API of gate-mux. Everything a proxy or an agent needs is exported from here.
export { ErrorCodes, GateError, isGateError, type ErrorCode } from './errors.js';
export { silentLogger, type Logger } from './log.js';

// Core multiplexer
export { Multiplexer, DEFAULT_MAX_HELLO_BYTES } from './mux/multiplexer.js';
export { runWorkers, type RunWorkersOptions, type WorkerPool, type WorkerRole } from './mux/cluster.js';
export { RouteTable, type RouteQuery } from './mux/route-table.js';
export type { StatsSnapshot, RouteCounters } from './mux/stats.js';
export type { ListenOptions, MultiplexerOptions, Route, RouteMatch } from './mux/types.js';
export type {
  ConnectionInfo,
  CustomHandler,
  DetectedProtocol,
  Endpoint,
  ForwardHandler,
  Handler,
  SelectHandler,
  WrapHandler,
  ServeHandler,
  TerminateHandler,
  UpstreamAddress,
} from './handlers/types.js';
export { forward, terminate, serve, custom, select, wrap, parseHostPort } from './handlers/builders.js';

// Pure parsers
export { parseClientHello, ClientHelloError, type ClientHello, type ClientHelloResult } from './tls/client-hello.js';
export { tlsAlertRecord } from './tls/alert.js';
export { sniffGreeting, type GreetingProtocol, type GreetingResult } from './sniff/greeting.js';
export {
  parseProxyHeader,
  encodeProxyHeaderV1,
  encodeProxyHeaderV2,
  ProxyHeaderError,
  type ProxyHeader,
  type ProxyAddress,
} from './proxy-protocol/header.js';

// Development certificates
export { CertificateAuthority, type KeyPair, type IssueOptions } from './pki/certificate-authority.js';
export { devCertificates, type DevCertificates } from './pki/dev-certificates.js';
export { caPin, parseCaPin } from './pki/ca-pin.js';
export { createKeyAndRequest, verifyRequest, type KeyAndRequest } from './pki/certificate-request.js';

// Stream framing of the -ping ALPN variants
export { PingFrameDecoder, frameHeader, PING_FRAME } from './framing/ping-frames.js';
export { PingFramedStream, DEFAULT_PING_INTERVAL_MS } from './framing/ping-stream.js';

// Client side: environment proxies, dialers, HTTP agent, local proxy
export * from './client/index.js';

// The proxy front door: configuration, listener plan, web endpoints
export * from './config/index.js';
export * from './proxy/index.js';
export { GateProxy, type GateProxyOptions } from './proxy/gate-proxy.js';
export { loadProxyCertificates, type ProxyCertificates } from './proxy/certificates.js';
export { routeFor, type WebServers, type RouteForOptions } from './proxy/route-handlers.js';
export { agentJoinHint, agentsInConfig, type JoinHintOptions } from './proxy/join-hint.js';
export {
  buildPing,
  VersionChannels,
  DEFAULT_CHANNEL,
  parseChannelPath,
  createWebRoutes,
  WebErrorCodes,
  type PingResponse,
  type FetchText,
  type FetchTextResult as ChannelFetchResult,
  type VersionChannelsOptions,
  type ChannelPath,
  type WebRequestHandler,
  type WebRoutesOptions,
} from './web/index.js';

// Reverse tunnels (agents dial out; the proxy opens streams through them)
export {
  startAgent,
  TunnelRegistry,
  viaTunnel,
  tunnelEndpoint,
  tunnelRoute,
  parseTunnelUpstream,
  joinProxy,
  renewIdentity,
  fetchPinnedCa,
  LocalAgentSessions,
  type AgentSessions,
  type JoinEndpoint,
  type AgentIdentity,
  type AgentOptions,
  type TunnelAgent,
  type AgentConnectedEvent,
  type TunnelRegistryOptions,
  type TunnelUpstream,
} from './tunnel/index.js';

// Automatic-update client (the updater beside each agent)
export {
  fetchTargetVersion,
  compareVersions,
  parseVersion,
  parseMaintenanceConfig,
  maintenanceWindow,
  shouldUpgrade,
  type MaintenanceConfig,
  type UpgradeDecision,
  type WindowState,
} from './upgrade/index.js';
