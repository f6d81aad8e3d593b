/**
 * Every error gate-mux raises or logs carries a stable `code` (GATE_ERR_*), so callers and log
 * queries can match on it without parsing messages. docs/errors.md lists them all.
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
  // TLS routing over a WebSocket connection upgrade (through load balancers that end TLS)
  CONN_UPGRADE_REFUSED: 'GATE_ERR_CONN_UPGRADE_REFUSED',
  CONN_UPGRADE_MESSAGE: 'GATE_ERR_CONN_UPGRADE_MESSAGE',
  CONN_UPGRADE_PING_TIMEOUT: 'GATE_ERR_CONN_UPGRADE_PING_TIMEOUT',
  // limits and lifecycle
  TOO_MANY_CONNECTIONS: 'GATE_ERR_TOO_MANY_CONNECTIONS',
  TOO_MANY_FROM_SOURCE: 'GATE_ERR_TOO_MANY_FROM_SOURCE',
  SHED: 'GATE_ERR_SHED',
  IDLE_TIMEOUT: 'GATE_ERR_IDLE_TIMEOUT',
  TLS_HANDSHAKE: 'GATE_ERR_TLS_HANDSHAKE',
  TLS_HANDSHAKE_TIMEOUT: 'GATE_ERR_TLS_HANDSHAKE_TIMEOUT',
  SHUTDOWN: 'GATE_ERR_SHUTDOWN',
  LISTEN_FAILED: 'GATE_ERR_LISTEN_FAILED',
  WORKER_START_FAILED: 'GATE_ERR_WORKER_START_FAILED',
  // upstream side
  DIAL_TIMEOUT: 'GATE_ERR_DIAL_TIMEOUT',
  DIAL_REFUSED: 'GATE_ERR_DIAL_REFUSED',
  DIAL_FAILED: 'GATE_ERR_DIAL_FAILED',
  UPSTREAM_RESET: 'GATE_ERR_UPSTREAM_RESET',
  CLIENT_RESET: 'GATE_ERR_CLIENT_RESET',
  HANDLER_FAILED: 'GATE_ERR_HANDLER_FAILED',
  // configuration and API arguments
  CONFIG_INVALID: 'GATE_ERR_CONFIG_INVALID',
  INVALID_ARGUMENT: 'GATE_ERR_INVALID_ARGUMENT',
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
  // reverse tunnels
  AGENT_NOT_CONNECTED: 'GATE_ERR_AGENT_NOT_CONNECTED',
  AGENT_STREAM_FAILED: 'GATE_ERR_AGENT_STREAM_FAILED',
  AGENT_TARGET_DENIED: 'GATE_ERR_AGENT_TARGET_DENIED',
  AGENT_IDENTITY: 'GATE_ERR_AGENT_IDENTITY',
  AGENT_HEARTBEAT_TIMEOUT: 'GATE_ERR_AGENT_HEARTBEAT_TIMEOUT',
  AGENT_OFFLINE: 'GATE_ERR_AGENT_OFFLINE',
  AGENT_BUSY: 'GATE_ERR_AGENT_BUSY',
  AGENT_DUPLICATE: 'GATE_ERR_AGENT_DUPLICATE',
  AGENT_CERT_UNTRUSTED: 'GATE_ERR_AGENT_CERT_UNTRUSTED',
  AGENT_CERT_EXPIRED: 'GATE_ERR_AGENT_CERT_EXPIRED',
  AGENT_CERT_REVOKED: 'GATE_ERR_AGENT_CERT_REVOKED',
  AGENT_STATE: 'GATE_ERR_AGENT_STATE',
  AGENT_DESCRIPTION_INVALID: 'GATE_ERR_AGENT_DESCRIPTION_INVALID',
  AGENT_SERVER_ID_MISMATCH: 'GATE_ERR_AGENT_SERVER_ID_MISMATCH',
  AGENT_VERSION_INCOMPATIBLE: 'GATE_ERR_AGENT_VERSION_INCOMPATIBLE',
  TUNNEL_PROTOCOL: 'GATE_ERR_TUNNEL_PROTOCOL',
  TUNNEL_FLOOD: 'GATE_ERR_TUNNEL_FLOOD',
  // several proxies as one cluster: peering and draining
  PEER_DIAL_FAILED: 'GATE_ERR_PEER_DIAL_FAILED',
  PEER_REFUSED: 'GATE_ERR_PEER_REFUSED',
  DRAINING: 'GATE_ERR_DRAINING',
  // joining: agents get their certificates over the web port
  JOIN_PIN_MISMATCH: 'GATE_ERR_JOIN_PIN_MISMATCH',
  JOIN_SERVER_UNTRUSTED: 'GATE_ERR_JOIN_SERVER_UNTRUSTED',
  JOIN_TOKEN_INVALID: 'GATE_ERR_JOIN_TOKEN_INVALID',
  JOIN_TOKEN_EXPIRED: 'GATE_ERR_JOIN_TOKEN_EXPIRED',
  JOIN_TOKEN_EXHAUSTED: 'GATE_ERR_JOIN_TOKEN_EXHAUSTED',
  JOIN_NAME_NOT_ALLOWED: 'GATE_ERR_JOIN_NAME_NOT_ALLOWED',
  JOIN_CSR_INVALID: 'GATE_ERR_JOIN_CSR_INVALID',
  JOIN_CSR_NAME_MISMATCH: 'GATE_ERR_JOIN_CSR_NAME_MISMATCH',
  JOIN_RENEW_REFUSED: 'GATE_ERR_JOIN_RENEW_REFUSED',
  JOIN_FAILED: 'GATE_ERR_JOIN_FAILED',
  // the web port's own endpoints, against anonymous load
  RATE_LIMITED: 'GATE_ERR_RATE_LIMITED',
  REQUEST_TOO_LARGE: 'GATE_ERR_REQUEST_TOO_LARGE',
  REQUEST_BODY_TIMEOUT: 'GATE_ERR_REQUEST_BODY_TIMEOUT',
  WEB_HEADERS_TIMEOUT: 'GATE_ERR_WEB_HEADERS_TIMEOUT',
  WEB_REQUEST_TIMEOUT: 'GATE_ERR_WEB_REQUEST_TIMEOUT',
  // automatic upgrades (the updater beside each agent)
  UPGRADE_VERSION_INVALID: 'GATE_ERR_UPGRADE_VERSION_INVALID',
  UPGRADE_SCHEDULE_INVALID: 'GATE_ERR_UPGRADE_SCHEDULE_INVALID',
  UPGRADE_CHANNEL: 'GATE_ERR_UPGRADE_CHANNEL',
  UPGRADE_INSECURE: 'GATE_ERR_UPGRADE_INSECURE',
  UPGRADE_SCHEDULE_UNAVAILABLE: 'GATE_ERR_UPGRADE_SCHEDULE_UNAVAILABLE',
  UPGRADE_SCHEDULE_WRITE: 'GATE_ERR_UPGRADE_SCHEDULE_WRITE',
  UPGRADE_LOCKED: 'GATE_ERR_UPGRADE_LOCKED',
  UPGRADE_INSTALL_FAILED: 'GATE_ERR_UPGRADE_INSTALL_FAILED',
  UPGRADE_VERIFY_FAILED: 'GATE_ERR_UPGRADE_VERIFY_FAILED',
  UPGRADE_FIND: 'GATE_ERR_UPGRADE_FIND',
  UPGRADE_UNHEALTHY: 'GATE_ERR_UPGRADE_UNHEALTHY',
  // several proxies as one cluster
  STORE_UNAVAILABLE: 'GATE_ERR_STORE_UNAVAILABLE',
  // the diagnostics listener
  DIAG_UNAUTHORIZED: 'GATE_ERR_DIAG_UNAUTHORIZED',
  // the admin command: cluster resources, identities, roles
  ADMIN_UNAUTHENTICATED: 'GATE_ERR_ADMIN_UNAUTHENTICATED',
  ACCESS_DENIED: 'GATE_ERR_ACCESS_DENIED',
  RESOURCE_INVALID: 'GATE_ERR_RESOURCE_INVALID',
  RESOURCE_EXISTS: 'GATE_ERR_RESOURCE_EXISTS',
  RESOURCE_NOT_FOUND: 'GATE_ERR_RESOURCE_NOT_FOUND',
  // managed rollouts
  ROLLOUT_HALTED: 'GATE_ERR_ROLLOUT_HALTED',
  ROLLOUT_COMMAND_REFUSED: 'GATE_ERR_ROLLOUT_COMMAND_REFUSED',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/**
 * Marks a GateError across copies of this package: two installed versions (a library and an
 * application each pulling its own) have two GateError classes, so `instanceof` answers false
 * for the other copy's errors. `Symbol.for` is one symbol per process, shared by every copy.
 */
const GATE_ERROR_BRAND = Symbol.for('gate-mux.GateError');

export class GateError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'GateError';
    this.code = code;
  }

  /**
   * `instanceof GateError` holds for any copy's GateError (the brand); a subclass keeps the usual
   * prototype check.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class `instanceof` asked about, a subclass included.
    if (this !== GateError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[GATE_ERROR_BRAND] === true;
  }
}
Object.defineProperty(GateError.prototype, GATE_ERROR_BRAND, { value: true });

/** True for a GateError (from any copy of this package) with the given code, or any code when none is given. */
export function isGateError(err: unknown, code?: ErrorCode): err is GateError {
  return err instanceof GateError && typeof err.code === 'string' && (code === undefined || err.code === code);
}

/**
 * `err` when it is a GateError already, else a GateError with `fallback` carrying `err` as its
 * cause (and its message, or `message` when given): what a catch that must report a stable code
 * uses instead of a cast that assumes it.
 */
export function toGateError(err: unknown, fallback: ErrorCode, message?: string): GateError {
  if (isGateError(err)) return err;
  const text = message ?? (err instanceof Error ? err.message : String(err));
  return new GateError(fallback, text, { cause: err });
}
