import { isWildcardHost, type HostPort } from './address.js';
import { parseStoreUrl } from './store-url.js';
import { LEGACY_PORTS } from './listen-addresses.js';
import { DEFAULT_PRESENCE_TTL_MS } from './gate-schema.js';
import type { ClusterConfig } from './types.js';
import { Checker, describe, type PathSegment } from './checker.js';
import { CLUSTER_KEYS } from './gate-keys.js';

// gate.yaml's top-level `cluster` section: the route store and how long this proxy's records live.

const MIN_PRESENCE_TTL_MS = 1_000;
const AIMED_PRESENCE_TTL_MS = 15_000;

/** The top-level `cluster` section: the route store and how long this proxy's records live. */
export function readCluster(c: Checker, value: unknown): ClusterConfig {
  const path: PathSegment[] = ['cluster'];
  const section = c.section(value, path) ?? {};
  c.keys(section, CLUSTER_KEYS, path);
  let store: ClusterConfig['store'] = { kind: 'memory' };
  if (section.store !== undefined) {
    const expected = 'memory, redis://[:password@]host[:port][/db] or rediss://…';
    if (typeof section.store !== 'string') {
      c.fail([...path, 'store'], `expected ${expected}, got ${describe(section.store)}`);
    } else {
      const result = parseStoreUrl(section.store);
      // The reason never repeats the value: it may hold the Redis password.
      if (result.ok) store = result.store;
      else c.fail([...path, 'store'], `expected ${expected}: ${result.reason}`);
    }
  }
  let storeCaFile: string | undefined;
  if (section.store_ca_file !== undefined) {
    storeCaFile = c.string(section.store_ca_file, [...path, 'store_ca_file'], 'a PEM file path');
    if (storeCaFile !== undefined && !(store.kind === 'redis' && store.tls)) {
      c.fail([...path, 'store_ca_file'], 'only read with store: rediss://… (TLS to Redis)');
    }
  }
  const presenceTtlMs = c.duration(section.presence_ttl, [...path, 'presence_ttl'], DEFAULT_PRESENCE_TTL_MS, {
    min: MIN_PRESENCE_TTL_MS,
    why: 'the proxy refreshes its records every third of it',
  });
  if (presenceTtlMs > AIMED_PRESENCE_TTL_MS) {
    c.warn(
      [...path, 'presence_ttl'],
      `a crashed proxy is dialled until its presence expires; above ${AIMED_PRESENCE_TTL_MS / 1000}s that is longer than clients usually wait`,
    );
  }
  return { store, storeCaFile, presenceTtlMs };
}

/** `peer_public_addr`: what other proxies dial, so never a wildcard (0.0.0.0 only means "every interface" to a listener). */
export function readPeerPublicAddr(c: Checker, value: unknown): HostPort | undefined {
  if (value === undefined) return undefined;
  const path = ['proxy_service', 'peer_public_addr'];
  const address = c.address(value, path, 'host[:port] other proxies can dial', { defaultPort: LEGACY_PORTS.peer });
  if (address && isWildcardHost(address.host)) {
    return c.fail(path, `expected an address other proxies can dial, got the wildcard ${address.host}`);
  }
  return address;
}

/** Two listeners collide when they share a port and their hosts overlap (equal, or one a wildcard). */
