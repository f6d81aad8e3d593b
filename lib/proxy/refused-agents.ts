import { ErrorCodes, GateError } from '../errors.js';
import type { TunnelRegistry } from '../tunnel/registry.js';

/** How long a refusal explains an agent's absence: its retries (with backoff) refresh it. */
const REMEMBER_MS = 10 * 60_000;
/** Names remembered at most: a flood of refused names cannot grow the proxy. */
const MAX_NAMES = 1024;

/**
 * Agents this proxy refused at admission for their version (GATE_ERR_AGENT_VERSION_INCOMPATIBLE),
 * remembered for a while by name. Such an agent is never connected, so a client routed to it
 * would be told it is offline; with this the client is told it was refused for its version
 * (issue 41), which is what the operator must fix. Forgotten when the agent is admitted.
 */
export class RefusedAgents {
  private readonly byName = new Map<string, { message: string; at: number }>();

  constructor(registry: TunnelRegistry) {
    registry.on('agent-refused', (error: GateError, name?: string) => {
      if (name === undefined || error.code !== ErrorCodes.AGENT_VERSION_INCOMPATIBLE) return;
      this.byName.delete(name);
      if (this.byName.size >= MAX_NAMES) this.byName.delete(this.byName.keys().next().value as string);
      this.byName.set(name, { message: error.message, at: Date.now() });
    });
    registry.on('agent-connected', (name: string) => this.byName.delete(name));
  }

  /** `error`, or for an offline agent refused recently for its version, that refusal. */
  explain(agent: string, error: GateError): GateError {
    if (error.code !== ErrorCodes.AGENT_OFFLINE) return error;
    const refused = this.byName.get(agent);
    if (!refused || Date.now() - refused.at > REMEMBER_MS) return error;
    return new GateError(
      ErrorCodes.AGENT_VERSION_INCOMPATIBLE,
      `agent ${agent} is not connected: refused for its version: ${refused.message}`,
      {
        cause: error,
      },
    );
  }
}
