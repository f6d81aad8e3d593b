// What a TunnelRegistry (registry.ts) is given and gives: its options, a stream's open options,
// and a connected agent as the inventory lists it.
import type { Logger } from '../log.js';
import type { DialCancel } from '../transport/dial-cancel.js';
import type { AgentDescription } from './agent-description.js';
import type { AgentSessions } from './agent-sessions.js';

export interface TunnelRegistryOptions {
  logger?: Logger;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /** Milliseconds an agent has to answer a stream (dial its target) before the open fails (default 15 s). */
  openTimeoutMs?: number;
  /** Is a certificate serial (lower-case hex, no leading zeros) revoked? Asked at each admission. */
  isRevoked?: (serial: string) => boolean;
  /** Where connected agents are kept (default: this process's map). */
  sessions?: AgentSessions;
  /**
   * The proxy's version: an agent whose version the rule of version-rule.ts refuses is refused
   * at admission (GATE_ERR_AGENT_VERSION_INCOMPATIBLE). Unset: every version is admitted.
   */
  version?: string;
}

/** A connected agent as the inventory lists it. */
export interface DescribedAgent {
  /** The name its certificate carries. */
  name: string;
  /** What it said about itself; undefined for an agent older than self-descriptions. */
  description: AgentDescription | undefined;
  /** Epoch milliseconds its tunnel was admitted. */
  since: number;
}

export interface OpenStreamOptions {
  /** Aborts the open (the client left): the stream is released with a FIN, never reset. */
  signal?: AbortSignal;
  /**
   * The same as `signal`, as the tunnel's handlers pass it (lib/transport/dial-cancel.ts): no
   * AbortSignal per connection. Read first; an opener hands on `cancel ?? signal`.
   */
  cancel?: DialCancel;
  timeoutMs?: number;
  /** The client's real address (`ip:port`), told to the agent in the stream's OPEN. */
  client?: string;
  /**
   * Bytes the client has sent already (the ClientHello the router peeked), written as DATA right
   * after the stream's OPEN: the far end holds them until it has dialled and writes them
   * first, so the client's first flight does not wait for the answer's round trip. A refused
   * stream drops them with its refusal; an opener that tries another route sends them again there.
   */
  firstBytes?: Buffer;
}
