// The HTTP status an endpoint of the proxy's web port answers a refusal with, by its GATE_ERR_*
// code: the agents' join and renewal (join-endpoint.ts) and the admin endpoint (lib/admin) read
// one table, so one code means one status wherever a client meets it. Beside request-body.ts,
// the other piece both endpoints share. Tunnel streams' refusals have their own (refusal-status.ts).
import { ErrorCodes } from '../errors.js';

/** The status for a refusal with `code`; 500 for a code not listed (an error of ours, not the client's). */
export function httpStatusForCode(code: string): number {
  switch (code) {
    case ErrorCodes.INVALID_ARGUMENT:
    case ErrorCodes.JOIN_CSR_INVALID:
    case ErrorCodes.JOIN_CSR_NAME_MISMATCH:
      return 400;
    case ErrorCodes.ADMIN_UNAUTHENTICATED:
    case ErrorCodes.JOIN_TOKEN_INVALID:
    case ErrorCodes.JOIN_TOKEN_EXPIRED:
    case ErrorCodes.JOIN_TOKEN_EXHAUSTED:
    case ErrorCodes.JOIN_RENEW_REFUSED:
      return 401;
    case ErrorCodes.ACCESS_DENIED:
    case ErrorCodes.JOIN_NAME_NOT_ALLOWED:
      return 403;
    case ErrorCodes.RESOURCE_NOT_FOUND:
      return 404;
    case ErrorCodes.REQUEST_BODY_TIMEOUT:
      return 408;
    // RFC 9110 §15.5.10: the request conflicts with the resource's current state.
    case ErrorCodes.RESOURCE_EXISTS:
    case ErrorCodes.ROLLOUT_COMMAND_REFUSED:
      return 409;
    case ErrorCodes.REQUEST_TOO_LARGE:
      return 413;
    // RFC 9110 §15.5.21: well-formed, but its content cannot be processed.
    case ErrorCodes.RESOURCE_INVALID:
      return 422;
    case ErrorCodes.RATE_LIMITED:
      return 429;
    case ErrorCodes.STORE_UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}
