/**
 * `gate-mux/mux`: the multiplexer alone — one listener, connections routed by TLS ClientHello
 * (SNI, ALPN) or plaintext greeting to forward / terminate / serve / custom handlers, with the
 * pure parsers it is built on. Loads no certificate, proxy or YAML package (only pino, the
 * logger interface): a router that imports this does not pay for the platform proxy.
 */
export { ErrorCodes, GateError, isGateError, type ErrorCode } from '../errors.js';
export { silentLogger, type Logger } from '../log.js';

export { Multiplexer, DEFAULT_MAX_HELLO_BYTES } from './multiplexer.js';
export { runWorkers, type RunWorkersOptions, type WorkerPool, type WorkerRole } from './cluster.js';
export { RouteTable, type RouteQuery } from './route-table.js';
export type { StatsSnapshot, RouteCounters } from './stats.js';
export type { ListenOptions, MultiplexerOptions, MultiplexerSettings, Route, RouteMatch } from './types.js';
export { ConnectionBudget, DEFAULT_HIGH_WATER, DEFAULT_SOURCE_SHARE, type BudgetOptions } from './connection-budget.js';
export { connectionCapFor, processDescriptorCap, softOpenFilesLimit, type DescriptorCap } from './descriptor-limit.js';
export { LogLimiter, type LogLimiterOptions } from '../log-limiter.js';
export { FAST_PATH_ENV } from '../transport/self-test.js';
export { NATIVE_RELAY_ENV, NATIVE_SPLICE_ENV, nativeRelayStatus } from '../transport/native-relay.js';

// Handlers: what a route does with a connection
export { forward, terminate, serve, custom, select, wrap, parseHostPort } from '../handlers/builders.js';
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
} from '../handlers/types.js';

// Pure parsers and encoders (no I/O)
export { parseClientHello, ClientHelloError, type ClientHello, type ClientHelloResult } from '../tls/client-hello.js';
export { tlsAlertRecord, TlsAlert } from '../tls/alert.js';
export { sniffGreeting, type GreetingProtocol, type GreetingResult } from '../sniff/greeting.js';
export {
  parseProxyHeader,
  encodeProxyHeaderV1,
  encodeProxyHeaderV2,
  ProxyHeaderError,
  type ProxyHeader,
  type ProxyAddress,
} from '../proxy-protocol/header.js';

// Stream framing of the -ping ALPN variants (a `wrap` handler's adapter)
export { PingFrameDecoder, frameHeader, PING_FRAME } from '../framing/ping-frames.js';
export { PingFramedStream, DEFAULT_PING_INTERVAL_MS } from '../framing/ping-stream.js';
