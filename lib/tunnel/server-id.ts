import { createHash } from 'node:crypto';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a UUID in its canonical text form (any version). */
export function isServerId(text: string): boolean {
  return UUID.test(text);
}

/**
 * An agent's server ID, its inventory key: derived from its name, the name its certificate
 * carries, so it is the same at every start, renewal and join. A UUID of version 8 (RFC 9562
 * §5.8, "custom"): the first 16 bytes of SHA-256 over a fixed prefix and the name, with the
 * version and variant bits set. Predictable, and listed by `/v1/inventory`, but bound to the
 * agent's authenticated identity: the proxy refuses a description naming any other
 * (GATE_ERR_AGENT_SERVER_ID_MISMATCH, registry.ts), so knowing another agent's ID gives nothing
 * (issue 37: an agent describing itself with another's ID replaced that agent's row). Pure.
 */
export function serverIdForName(name: string): string {
  const bytes = createHash('sha256').update(`gate-mux agent server id\0${name}`).digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
