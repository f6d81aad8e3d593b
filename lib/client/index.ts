/**
 * `gate-mux/client`: how agents and the client tool reach the proxy from behind corporate proxies —
 * HTTPS_PROXY / HTTP_PROXY / NO_PROXY resolved once (README: "Client side"), HTTP CONNECT and
 * SOCKS5 dialers, TLS dialing with ALPN/SNI, an HTTP agent giving the same answers, and the local
 * proxy that lets stock clients (psql, redis-cli, ...) use the one port. Through a load balancer
 * that ends TLS, the TLS goes inside a WebSocket connection upgrade (detected per proxy address).
 */
export { parseTarget, formatHostPort, type DialTarget } from './target.js';
export { parseNoProxy, noProxyMatches, isLoopbackHost, type NoProxyRules, type DomainRule } from './no-proxy.js';
export { readProxyEnv, type ProxyEnv, type EnvValue } from './env-proxy.js';
export { ProxyConfig, parseProxyUrl, redactProxyValue, DEFAULT_PROXY_PORTS, type ProxyScheme } from './proxy-config.js';
export { proxyForTarget, type ProxyRule } from './resolve-proxy.js';
export { ProxyError } from './proxy-error.js';
export { parseConnectResponse, DEFAULT_MAX_CONNECT_HEADER_BYTES, type ConnectResponseParse } from './connect-response.js';
export { httpConnect } from './http-connect.js';
export { socksConnect } from './socks-connect.js';
export { dial, DEFAULT_DIAL_TIMEOUT_MS, type DialOptions, type DialResult } from './dial.js';
export { dialTls, type DialTlsOptions, type DialTlsResult, type ConnectionUpgradeDial } from './dial-tls.js';
export { forcedUpgrade, UpgradeDecisions, upgradeDecisions, UPGRADE_DECISION_TTL_MS } from './upgrade-decision.js';
export { proxyAgentFor, proxyUrlFor, type ProxyAgentForOptions } from './http-agent.js';
export { fetchText, type FetchTextOptions, type FetchTextResult } from './fetch-text.js';
export { startLocalProxy, type LocalProxy, type LocalProxyOptions } from './local-proxy.js';
