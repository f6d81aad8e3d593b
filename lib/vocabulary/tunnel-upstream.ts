import { parseTarget, formatHostPort } from '../client/target.js';
import { ErrorCodes, GateError } from '../errors.js';
import { isValidAgentName } from './agent-name.js';

/** An upstream reached through an agent's tunnel: `tunnel:<agent>/<host:port>`. */
export interface TunnelUpstream {
  agent: string;
  /** `host:port` (IPv6 bracketed) as the agent will dial it. */
  target: string;
}

const PREFIX = 'tunnel:';

export function isTunnelUpstream(value: string): boolean {
  return value.startsWith(PREFIX);
}

/**
 * Parses `tunnel:agent-name/127.0.0.1:5432` (or `tunnel:db-agent/[::1]:5432`). Pure; throws
 * GATE_ERR_CONFIG_INVALID naming what is wrong.
 */
export function parseTunnelUpstream(value: string): TunnelUpstream {
  if (!value.startsWith(PREFIX))
    throw new GateError(ErrorCodes.CONFIG_INVALID, `${JSON.stringify(value)}: a tunnel upstream starts with "${PREFIX}"`);
  const rest = value.slice(PREFIX.length);
  const slash = rest.indexOf('/');
  if (slash < 0) throw new GateError(ErrorCodes.CONFIG_INVALID, `${JSON.stringify(value)}: expected tunnel:<agent>/<host:port>`);
  const agent = rest.slice(0, slash);
  if (!isValidAgentName(agent))
    throw new GateError(ErrorCodes.CONFIG_INVALID, `${JSON.stringify(value)}: ${JSON.stringify(agent)} is not a valid agent name`);
  let target;
  try {
    target = parseTarget(rest.slice(slash + 1));
  } catch (err) {
    throw new GateError(ErrorCodes.CONFIG_INVALID, `${JSON.stringify(value)}: ${(err as Error).message}`, { cause: err });
  }
  if (target.scheme !== undefined)
    throw new GateError(ErrorCodes.CONFIG_INVALID, `${JSON.stringify(value)}: the target is host:port, not a URL`);
  return { agent, target: formatHostPort(target.host, target.port) };
}
