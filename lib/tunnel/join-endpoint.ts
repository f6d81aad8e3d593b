import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { ErrorCodes, GateError, isGateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { AGENT_CA_PATH, AGENT_JOIN_PATH, AGENT_RENEW_PATH } from '../wire/names.js';
import { sourceOf } from '../handlers/connection-source.js';
import { LogLimiter } from '../log-limiter.js';
import { DEFAULT_JOIN_LIMITS, type JoinLimits } from '../vocabulary/join-limits.js';
import { readBody } from './request-body.js';
import { SourceRateLimiter } from './source-rate-limit.js';
import { verifyErrorCode, type AgentTlsFacts } from './admission.js';
import type { AgentAuthority } from './agent-authority.js';
import { httpStatusForCode } from './http-error-status.js';

/** A join request is a name, a token and a CSR: a few KiB. Anything larger is refused unread. */
export const MAX_BODY_BYTES = 64 * 1024;

/** How long a connection whose request was refused part-way may keep sending before it is closed. */
const REFUSED_DRAIN_MS = 2000;

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

async function readJson(req: IncomingMessage, timeoutMs: number): Promise<Record<string, unknown>> {
  const body = await readBody(req, { maxBytes: MAX_BODY_BYTES, timeoutMs });
  try {
    // JSON.parse is iterative in V8: 64 KiB nested as deep as it goes parses in milliseconds.
    const value: unknown = JSON.parse(body.toString('utf8'));
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('not an object');
    return value as Record<string, unknown>;
  } catch (err) {
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `request body is not a JSON object: ${(err as Error).message}`);
  }
}

/** The renew request's TLS facts: the web server asks every client for a certificate and verifies it against the cluster CA. */
function tlsFacts(req: IncomingMessage): AgentTlsFacts {
  const socket = req.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function') return { authorized: false, authorizationError: 'not TLS', certificate: undefined };
  const peer = socket.getPeerCertificate();
  return {
    authorized: socket.authorized === true,
    authorizationError: verifyErrorCode(socket.authorizationError),
    certificate: peer && Object.keys(peer).length > 0 ? peer : undefined,
  };
}

/**
 * The web port's agent endpoints (paths in lib/wire/names.ts): the cluster CA, join with a token,
 * renew with the current certificate. Returns false for other paths. Answers are JSON; a refusal is
 * `{"error":{"code":"GATE_ERR_...","message":...}}` with a 4xx status, and is logged with its code
 * (never the token). Renew only counts over TLS: over plaintext HTTP it is GATE_ERR_JOIN_RENEW_REFUSED.
 */
export function createJoinRoutes(
  authority: () => AgentAuthority,
  caPem: () => string,
  logger?: Logger,
  limits: () => JoinLimits = () => DEFAULT_JOIN_LIMITS,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const failureLog = new LogLimiter(componentLogger(logger, 'join'));
  // Rate-limited before the body is read: an over-eager source costs a map lookup.
  const joinLimiter = new SourceRateLimiter(limits().join);
  const renewLimiter = new SourceRateLimiter(limits().renew);
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== AGENT_CA_PATH && path !== AGENT_JOIN_PATH && path !== AGENT_RENEW_PATH) return false;
    const method = path === AGENT_CA_PATH ? 'GET' : 'POST';
    if (req.method !== method) {
      res.setHeader('Allow', method);
      sendJson(res, 405, { error: { code: 'method_not_allowed', message: `only ${method}` } });
      return true;
    }
    if (path === AGENT_CA_PATH) {
      const pem = caPem();
      res.statusCode = 200;
      res.setHeader('Content-Type', 'application/x-pem-file');
      res.setHeader('Content-Length', Buffer.byteLength(pem));
      res.end(pem);
      return true;
    }
    const remote = `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`;
    const source = sourceOf(req.socket) ?? '?';
    const isJoin = path === AGENT_JOIN_PATH;
    const current = limits();
    const limiter = isJoin ? joinLimiter : renewLimiter;
    limiter.setLimit(isJoin ? current.join : current.renew);
    if (!limiter.take(source)) {
      res.setHeader('Retry-After', Math.max(1, Math.ceil(limiter.retryAfterMs(source) / 1000)));
      refuse(req, res, new GateError(ErrorCodes.RATE_LIMITED, `too many ${isJoin ? 'joins' : 'renewals'} from ${source}`), {
        remote,
        source,
        path,
      });
      return true;
    }
    // A renewal is admitted by its client certificate (checked in the TLS handshake) before its body is read.
    const facts = isJoin ? undefined : tlsFacts(req);
    Promise.resolve()
      .then(() => facts && authority().admitRenewal(facts))
      .then(() => readJson(req, current.bodyTimeoutMs))
      .then((body) =>
        isJoin ? authority().join({ token: body.token, name: body.name, csr: body.csr }) : authority().renew(facts!, { csr: body.csr }),
      )
      .then(
        (issued) => sendJson(res, 200, issued),
        (err: unknown) =>
          refuse(req, res, isGateError(err) ? err : new GateError(ErrorCodes.JOIN_FAILED, (err as Error).message, { cause: err }), {
            remote,
            source,
            path,
          }),
      );
    return true;
  };

  function refuse(
    req: IncomingMessage,
    res: ServerResponse,
    error: GateError,
    where: { remote: string; source: string; path: string },
  ): void {
    // Refusals an anonymous flood causes are logged at a bounded rate, never once each.
    failureLog.log(
      'warn',
      error.code,
      { ...where, code: error.code },
      `agent ${where.path === AGENT_JOIN_PATH ? 'join' : 'renewal'} refused: ${error.message}`,
    );
    if (res.headersSent || res.destroyed) return;
    sendJson(res, httpStatusForCode(error.code), { error: { code: error.code, message: error.message } });
    // A request refused before its body was read whole: node:http discards the rest as it comes
    // (closing at once would reset the connection under a client still sending, and with it the
    // answer it has not read yet); an HTTP/1 connection gets REFUSED_DRAIN_MS for that, then goes.
    if (req.complete || req.httpVersionMajor !== 1) return;
    const socket = req.socket;
    const drained = setTimeout(() => socket.destroy(), REFUSED_DRAIN_MS).unref();
    socket.once('close', () => clearTimeout(drained));
  }
}
