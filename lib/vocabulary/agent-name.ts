/**
 * An agent's name: what routes refer to (`viaTunnel(registry, name, ...)`), what the proxy reads
 * from the agent's client certificate, and what the configuration names in
 * `tunnel:<name>/<host:port>`. Kept to DNS-label-like characters so it is safe in logs, headers
 * and configuration values.
 */
const AGENT_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?$/;

export function isValidAgentName(name: string): boolean {
  return AGENT_NAME.test(name);
}
