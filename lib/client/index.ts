/**
 * `gate-mux/client`: how agents and the client tool reach the proxy from behind corporate proxies —
 * HTTPS_PROXY / HTTP_PROXY / NO_PROXY resolved once, HTTP CONNECT and SOCKS5 dialers, TLS dialing
 * with ALPN/SNI, an HTTP agent giving the same answers, and the local proxy that lets stock
 * clients (psql, redis-cli, ...) use the one port. Through a load balancer that ends TLS, the TLS
 * goes inside a WebSocket connection upgrade (detected per proxy address).
 * docs/api/client.md documents each name; parts not named here are in `gate-mux/internal`.
 */
export type { DialTarget } from './target.js';
export type { ProxyEnv, EnvValue } from './env-proxy.js';
export { ProxyConfig, type ProxyScheme } from './proxy-config.js';
export { proxyForTarget, type ProxyRule } from './resolve-proxy.js';
export { ProxyError } from './proxy-error.js';
export { httpConnect } from './http-connect.js';
export { socksConnect } from './socks-connect.js';
export { dial, DEFAULT_DIAL_TIMEOUT_MS, type DialOptions, type DialResult } from './dial.js';
export { dialTls, type DialTlsOptions, type DialTlsResult, type ConnectionUpgradeDial } from './dial-tls.js';
export { proxyAgentFor, type ProxyAgentForOptions } from './http-agent.js';
export { fetchText, type FetchTextOptions, type FetchTextResult } from './fetch-text.js';
export { startLocalProxy, type LocalProxy, type LocalProxyOptions } from './local-proxy.js';
