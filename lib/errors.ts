/**
 * Every error gate-mux raises or logs carries a stable `code` (GATE_ERR_*), so callers and log
 * queries can match on it without parsing messages. README lists them all.
 */
export const ErrorCodes = {
  // ClientHello / detection
  HELLO_MALFORMED: 'GATE_ERR_HELLO_MALFORMED',
  HELLO_TOO_LARGE: 'GATE_ERR_HELLO_TOO_LARGE',
  NOT_TLS: 'GATE_ERR_NOT_TLS',
  DETECT_TIMEOUT: 'GATE_ERR_DETECT_TIMEOUT',
  UNKNOWN_PROTOCOL: 'GATE_ERR_UNKNOWN_PROTOCOL',
  CLIENT_CLOSED: 'GATE_ERR_CLIENT_CLOSED',
  NO_ROUTE: 'GATE_ERR_NO_ROUTE',
  PROXY_HEADER_MALFORMED: 'GATE_ERR_PROXY_HEADER_MALFORMED',
  PROXY_HEADER_REFUSED: 'GATE_ERR_PROXY_HEADER_REFUSED',
  PROXY_HEADER_MISSING: 'GATE_ERR_PROXY_HEADER_MISSING',
  // limits and lifecycle
  TOO_MANY_CONNECTIONS: 'GATE_ERR_TOO_MANY_CONNECTIONS',
  TOO_MANY_FROM_SOURCE: 'GATE_ERR_TOO_MANY_FROM_SOURCE',
  IDLE_TIMEOUT: 'GATE_ERR_IDLE_TIMEOUT',
  TLS_HANDSHAKE: 'GATE_ERR_TLS_HANDSHAKE',
  TLS_HANDSHAKE_TIMEOUT: 'GATE_ERR_TLS_HANDSHAKE_TIMEOUT',
  SHUTDOWN: 'GATE_ERR_SHUTDOWN',
  // upstream side
  DIAL_TIMEOUT: 'GATE_ERR_DIAL_TIMEOUT',
  DIAL_REFUSED: 'GATE_ERR_DIAL_REFUSED',
  DIAL_FAILED: 'GATE_ERR_DIAL_FAILED',
  UPSTREAM_RESET: 'GATE_ERR_UPSTREAM_RESET',
  CLIENT_RESET: 'GATE_ERR_CLIENT_RESET',
  HANDLER_FAILED: 'GATE_ERR_HANDLER_FAILED',
  // configuration
  CONFIG_INVALID: 'GATE_ERR_CONFIG_INVALID',
  // client side: environment proxies, dialer, TLS dialer, small HTTP client
  PROXY_ENV_INVALID: 'GATE_ERR_PROXY_ENV_INVALID',
  TARGET_INVALID: 'GATE_ERR_TARGET_INVALID',
  PROXY_UNREACHABLE: 'GATE_ERR_PROXY_UNREACHABLE',
  PROXY_AUTH_REQUIRED: 'GATE_ERR_PROXY_AUTH_REQUIRED',
  PROXY_FORBIDDEN: 'GATE_ERR_PROXY_FORBIDDEN',
  PROXY_STATUS: 'GATE_ERR_PROXY_STATUS',
  PROXY_CLOSED: 'GATE_ERR_PROXY_CLOSED',
  PROXY_HEADER_TOO_LARGE: 'GATE_ERR_PROXY_HEADER_TOO_LARGE',
  PROXY_RESPONSE_MALFORMED: 'GATE_ERR_PROXY_RESPONSE_MALFORMED',
  DIAL_ABORTED: 'GATE_ERR_DIAL_ABORTED',
  ALPN_MISMATCH: 'GATE_ERR_ALPN_MISMATCH',
  FETCH_TIMEOUT: 'GATE_ERR_FETCH_TIMEOUT',
  FETCH_TOO_LARGE: 'GATE_ERR_FETCH_TOO_LARGE',
  FETCH_FAILED: 'GATE_ERR_FETCH_FAILED',
  // web endpoints: version channels
  CHANNEL_NAME_INVALID: 'GATE_ERR_CHANNEL_NAME_INVALID',
  CHANNEL_NOT_FOUND: 'GATE_ERR_CHANNEL_NOT_FOUND',
  CHANNEL_UPSTREAM: 'GATE_ERR_CHANNEL_UPSTREAM',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes] | `GATE_ERR_${string}`;

export class GateError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'GateError';
    this.code = code;
  }
}

/** True for a GateError with the given code (or any GateError when no code is given). */
export function isGateError(err: unknown, code?: ErrorCode): err is GateError {
  return err instanceof GateError && (code === undefined || err.code === code);
}
