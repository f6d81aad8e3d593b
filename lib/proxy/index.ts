/**
 * `gate-mux/proxy`: the platform's front door built from the multiplexer — a YAML configuration
 * turned into listeners, routes and handlers (`GateProxy`), and the web endpoints it serves
 * (`/webapi/ping`, the automatic-upgrade version channels) for mounting on a server of your own.
 * docs/api/proxy.md documents each name; parts not named here are in `gate-mux/internal`.
 */
export { GateProxy, type GateProxyOptions } from './gate-proxy.js';

// Configuration (YAML)
export { parseConfig, loadConfig, ConfigError, type ConfigProblem, type ParseConfigOptions } from '../config/load.js';
export { parseAddress, formatAddress, type HostPort, type ParseAddressResult, type ParseAddressOptions } from '../config/address.js';
export type {
  GateConfig,
  LoadedConfig,
  ListenerMode,
  ProxyServiceConfig,
  KeyPairFiles,
  UpstreamProtocol,
  ProxyProtocolName,
  AgentAuthConfig,
  JoinTokenConfig,
  Upstream,
  AgentUpstream,
} from '../config/types.js';
export type { ChannelConfig } from '../config/channel.js';
export type { JoinLimits, RateLimit } from '../vocabulary/join-limits.js';
export type { JoinTokenRule } from '../vocabulary/join-token-rule.js';

// Web endpoints
export {
  VersionChannels,
  DEFAULT_CHANNEL,
  type VersionChannelsOptions,
  type FetchText,
  type FetchTextResult as ChannelFetchResult,
} from '../web/version-channels.js';
export {
  createWebRoutes,
  WebErrorCodes,
  type WebRequestHandler,
  type WebRequest,
  type WebResponse,
  type WebRoutesOptions,
} from '../web/routes.js';
export type { FindAutoUpdate } from '../web/find.js';
export type { PingResponse } from '../web/ping.js';
