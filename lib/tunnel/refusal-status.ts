// How a refused tunnel stream says why, whoever refuses it (an agent, a peer proxy): an HTTP-like
// status, a GATE_ERR_* code and a reason in the stream's ANSWER (docs/tunnel-framing.md). Kept
// apart from any opener or server so that both ends read one list.
import { ErrorCodes, type ErrorCode } from '../errors.js';

/** The status a refusal with `code` carries. */
export function statusForCode(code: string): number {
  switch (code) {
    case ErrorCodes.AGENT_TARGET_DENIED:
      return 403;
    case ErrorCodes.TARGET_INVALID:
      return 400;
    case ErrorCodes.DIAL_TIMEOUT:
      return 504;
    case ErrorCodes.AGENT_BUSY:
      return 503;
    default:
      return 502;
  }
}

/** A refusal as the opener reads it. */
export interface Refusal {
  /** The code the other side named: one of ours (GATE_ERR_*) only, else undefined. */
  code: ErrorCode | undefined;
  message: string;
}

/** `text` as a refusal's code: kept if it has the shape of ours, else undefined. */
export function refusalCode(text: unknown): ErrorCode | undefined {
  return typeof text === 'string' && /^GATE_ERR_[A-Z0-9_]+$/.test(text) ? (text as ErrorCode) : undefined;
}
