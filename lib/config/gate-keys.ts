import { GATE_SCHEMA } from './gate-schema.js';
import { keysOf } from './schema.js';

// The key lists of gate.yaml, from its one declaration (gate-schema.ts), which the JSON Schema for
// editors is generated from too; the readers check values and normalise them.
export const TOP_KEYS = keysOf(GATE_SCHEMA);
export const CLUSTER_KEYS = keysOf(GATE_SCHEMA, 'cluster');
export const AUTH_KEYS = keysOf(GATE_SCHEMA, 'auth_service');
export const RATE_LIMIT_KEYS = keysOf(GATE_SCHEMA, 'auth_service', 'join_rate_limit');
export const JOIN_TOKEN_KEYS = keysOf(GATE_SCHEMA, 'auth_service', 'join_tokens', '*');
/** Below this a certificate could expire before the agent's renewal (at two thirds) gets through. */
export const PROXY_KEYS = keysOf(GATE_SCHEMA, 'proxy_service');
export const KEYPAIR_KEYS = keysOf(GATE_SCHEMA, 'proxy_service', 'https_keypairs', '*');
export const CHANNEL_KEYS = keysOf(GATE_SCHEMA, 'proxy_service', 'automatic_upgrades_channels', '*');
export const MAINTENANCE_KEYS = keysOf(GATE_SCHEMA, 'proxy_service', 'cluster_maintenance_config');
export const UPSTREAM_KEYS = keysOf(GATE_SCHEMA, 'proxy_service', 'upstreams');

/** Which section each key belongs to, to point at the right place when one is misplaced. */
export const SECTION_OF: Record<string, string> = {
  ...Object.fromEntries(AUTH_KEYS.map((k) => [k, 'auth_service'])),
  ...Object.fromEntries(PROXY_KEYS.map((k) => [k, 'proxy_service'])),
  ...Object.fromEntries(CLUSTER_KEYS.map((k) => [k, 'cluster'])),
  ...Object.fromEntries(TOP_KEYS.map((k) => [k, 'the top level'])),
};
