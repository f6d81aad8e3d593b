import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { ErrorCodes, type ErrorCode } from '../errors.js';
import { CLIENT_ADDR_HEADER } from '../wire/names.js';

/**
 * The one request the tunnel knows: the proxy opens an HTTP/2 stream with an extended-less CONNECT
 * (RFC 9113 §8.5: `:method CONNECT`, `:authority host:port`, no `:scheme`/`:path`) and the agent
 * answers 200 once it has dialled the target, or an error status with a stable code. After a 200 the
 * stream's DATA frames are the TCP bytes in each direction and END_STREAM is a FIN. The proxy may
 * send the client's first bytes before the answer (OpenStreamOptions.firstBytes): the agent reads
 * nothing from the stream until it has dialled, so they reach the target first, or are dropped
 * with a refusal.
 */

/** Header carrying the GATE_ERR_* code of a refused stream. */
export const ERROR_CODE_HEADER = 'gate-error-code';
/** Header carrying a short human-readable reason. */
export const ERROR_MESSAGE_HEADER = 'gate-error';

/**
 * The CONNECT for `target`; `client` (the client's real address, `ip:port`) goes along in
 * CLIENT_ADDR_HEADER so the agent side can log and audit who it dials for.
 */
export function connectRequestHeaders(target: string, client?: string): OutgoingHttpHeaders {
  return { ':method': 'CONNECT', ':authority': target, ...(client ? { [CLIENT_ADDR_HEADER]: headerSafe(client) } : {}) };
}

/** HTTP status an agent answers with for a failure code. */
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

/**
 * Header values cannot hold CR, LF or NUL (RFC 9113 §8.2.1), and a reason should stay short:
 * anything outside printable ASCII becomes `?`, and the text is cut at 200 characters.
 */
export function headerSafe(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);
}

/** The refusal an agent sends for an error with a code. */
export function refusalHeaders(code: string, message: string): OutgoingHttpHeaders {
  return { ':status': statusForCode(code), [ERROR_CODE_HEADER]: headerSafe(code), [ERROR_MESSAGE_HEADER]: headerSafe(message) };
}

/** A refusal as the opener reads it, whichever protocol carried it. */
export interface Refusal {
  /** The code the other side named: one of ours (GATE_ERR_*) only, else undefined. */
  code: ErrorCode | undefined;
  message: string;
}

/** `text` as a refusal's code: kept if it has the shape of ours, else undefined. */
export function refusalCode(text: unknown): ErrorCode | undefined {
  return typeof text === 'string' && /^GATE_ERR_[A-Z0-9_]+$/.test(text) ? (text as ErrorCode) : undefined;
}

/** Reads an agent's refusal: the code it named (GATE_ERR_* only, else undefined) and its reason. */
export function readRefusal(headers: IncomingHttpHeaders): Refusal {
  const message = headers[ERROR_MESSAGE_HEADER];
  return {
    code: refusalCode(headers[ERROR_CODE_HEADER]),
    message: typeof message === 'string' ? message : `HTTP ${String(headers[':status'])}`,
  };
}

/** RFC 9113 §7 error code names, for messages about reset streams. */
const H2_ERROR_NAMES: Record<number, string> = {
  0: 'NO_ERROR',
  1: 'PROTOCOL_ERROR',
  2: 'INTERNAL_ERROR',
  3: 'FLOW_CONTROL_ERROR',
  5: 'STREAM_CLOSED',
  7: 'REFUSED_STREAM',
  8: 'CANCEL',
  10: 'CONNECT_ERROR',
  11: 'ENHANCE_YOUR_CALM',
};

export function h2ErrorName(code: number | undefined): string {
  return code === undefined ? 'unknown' : (H2_ERROR_NAMES[code] ?? `error ${code}`);
}
