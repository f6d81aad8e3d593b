/**
 * `gate-mux/mux`: the multiplexer alone — one listener, connections routed by TLS ClientHello
 * (SNI, ALPN) or plaintext greeting to forward / terminate / serve / custom handlers, with the
 * pure parsers it is built on. Loads no certificate, proxy or YAML package (only pino, the
 * logger interface): a router that imports this does not pay for the platform proxy.
 * docs/api/mux.md documents each name; parts not named here are in `gate-mux/internal`.
 */
export { ErrorCodes, GateError, isGateError, type ErrorCode } from '../errors.js';
export { silentLogger, type Logger } from '../log.js';
export type { Closable, CloseOptions, ConnectionState, LifecycleState } from '../lifecycle.js';

export { Multiplexer } from './multiplexer.js';
export { runWorkers, type RunWorkersOptions, type WorkerPool, type WorkerRole } from './workers.js';
export type { StatsSnapshot, RouteCounters } from './stats.js';
export type { ListenOptions, MultiplexerOptions, MultiplexerSettings, Route, RouteMatch } from './types.js';
export { ConnectionBudget, type BudgetOptions } from './connection-budget.js';
export type { SourceCounts } from './source-limit.js';
export type { ByteCounts } from '../transport/client-end.js';
export { nativeRelayStatus } from '../transport/native-relay.js';

// Handlers: what a route does with a connection
export { forward, terminate, serve, custom, select, wrap } from '../handlers/builders.js';
export type {
  ConnectionInfo,
  CustomHandler,
  DetectedProtocol,
  Endpoint,
  ForwardHandler,
  Handler,
  SelectHandler,
  ServeHandler,
  TerminateHandler,
  UpstreamAddress,
  WrapHandler,
  RefusalProtocol,
} from '../handlers/types.js';

// Pure parsers and encoders (no I/O)
export {
  parseClientHello,
  ClientHelloError,
  type ClientHello,
  type ClientHelloResult,
  type ParseClientHelloOptions,
} from '../tls/client-hello.js';
export { sniffGreeting, type GreetingProtocol, type GreetingResult } from '../sniff/greeting.js';
export {
  parseProxyHeader,
  encodeProxyHeaderV1,
  encodeProxyHeaderV2,
  ProxyHeaderError,
  type ProxyHeader,
  type ProxyAddress,
  type EncodeProxyV2Options,
  type ProxyTlv,
  type ProxyHeaderResult,
} from '../proxy-protocol/header.js';
