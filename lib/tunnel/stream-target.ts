// The target a tunnel stream asks for, checked as the agent checks every stream's before it dials
// anything (and as a peer proxy checks a forwarded one's syntax).
import { formatHostPort, parseTarget } from '../client/target.js';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';

/** A target a stream may open: parsed, and allowed by the agent's policy. */
export interface CheckedTarget {
  host: string;
  port: number;
  /** `host:port`, as the policy and the log see it. */
  target: string;
}

/**
 * The target a stream asks for (`host:port`): its syntax (GATE_ERR_TARGET_INVALID), then the
 * agent's policy (GATE_ERR_AGENT_TARGET_DENIED, logged). Returns the refusal to send, or the
 * target to dial.
 */
export function checkTarget(text: string, options: { allow: (target: string) => boolean; log: Logger }): CheckedTarget | GateError {
  let host: string;
  let port: number;
  try {
    const parsed = parseTarget(text);
    if (parsed.scheme !== undefined) throw new GateError(ErrorCodes.TARGET_INVALID, 'a tunnel stream opens host:port, not a URL');
    ({ host, port } = parsed);
  } catch (err) {
    return new GateError(ErrorCodes.TARGET_INVALID, (err as Error).message);
  }
  const target = formatHostPort(host, port);
  if (!options.allow(target)) {
    options.log.warn({ target, code: ErrorCodes.AGENT_TARGET_DENIED }, 'refused a stream to a target outside the policy');
    return new GateError(ErrorCodes.AGENT_TARGET_DENIED, `this agent does not serve ${target}`);
  }
  return { host, port, target };
}
