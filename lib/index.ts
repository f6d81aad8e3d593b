/**
 * gate-mux's public API: what a proxy, an agent or a client tool needs (at most about 100 names).
 * Each group is also its own entry point, for programs that want only that part (and only its
 * dependencies): `gate-mux/mux`, `gate-mux/wire`, `gate-mux/client`, `gate-mux/proxy`,
 * `gate-mux/tunnel`. The updater's parts (`gate-mux/updater`) are for the `gate-upgrade` command
 * and tools like it, and stay on their own entry point.
 * docs/api/ has a page per entry point with a heading per name (a test keeps them in step);
 * docs/ARCHITECTURE.md maps them to the folders. The building blocks behind them are in
 * `gate-mux/internal`, which may change in any release.
 */
export * from './mux/index.js';
export * from './wire/index.js';
export * from './client/index.js';
export * from './proxy/index.js';
export * from './tunnel/index.js';

// TLS routing through load balancers that end TLS: the WebSocket connection upgrade's server
// handler, to mount on a web server of your own
export {
  ConnectionUpgrade,
  type ConnectionUpgradeOptions,
  type ConnectionUpgradeSettings,
  type UpgradeCounts,
  type StreamAcceptor,
} from './conn-upgrade/upgrade-server.js';
export type { CarriedTally } from './conn-upgrade/websocket-stream.js';

// Certificates: a CA for agents and tests, development certificates, the pin agents check
export { CertificateAuthority, type KeyPair, type IssueOptions, type IssuedCertificate } from './pki/certificate-authority.js';
export { devCertificates, type DevCertificates } from './pki/dev-certificates.js';
export { caPin } from './pki/ca-pin.js';

// Several proxies as one cluster: the shared route store (`cluster:` in gate.yaml chooses one)
export type { RouteStore, ProxyPresence, TunnelHolding, InventoryRecord } from './cluster/route-store.js';
export type { ResourceStore, StoredResource, ResourceWrite, PutMode } from './cluster/resource-store.js';
export { MemoryRouteStore } from './cluster/memory-route-store.js';
export { RedisRouteStore, type RedisRouteStoreOptions } from './cluster/redis-route-store.js';
export type { ClusterConfig, StoreConfig } from './config/types.js';
