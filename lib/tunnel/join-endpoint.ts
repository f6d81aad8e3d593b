import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { ErrorCodes, GateError, isGateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { AGENT_CA_PATH, AGENT_JOIN_PATH, AGENT_RENEW_PATH } from '../wire/names.js';
import { verifyErrorCode, type AgentTlsFacts } from './admission.js';
import type { AgentAuthority } from './agent-authority.js';

/** A join request is a name, a token and a CSR: a few KiB. Anything larger is refused unread. */
const MAX_BODY_BYTES = 64 * 1024;

/** HTTP status for each refusal (the body carries the GATE_ERR_* code). */
function statusOf(code: string): number {
  switch (code) {
    case ErrorCodes.JOIN_TOKEN_INVALID:
    case ErrorCodes.JOIN_TOKEN_EXPIRED:
    case ErrorCodes.JOIN_TOKEN_EXHAUSTED:
    case ErrorCodes.JOIN_RENEW_REFUSED:
      return 401;
    case ErrorCodes.JOIN_NAME_NOT_ALLOWED:
      return 403;
    case ErrorCodes.JOIN_CSR_INVALID:
    case ErrorCodes.JOIN_CSR_NAME_MISMATCH:
    case ErrorCodes.INVALID_ARGUMENT:
      return 400;
    default:
      return 500;
  }
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new GateError(ErrorCodes.INVALID_ARGUMENT, `request body over ${MAX_BODY_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.once('end', () => {
      try {
        const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('not an object');
        resolve(value as Record<string, unknown>);
      } catch (err) {
        reject(new GateError(ErrorCodes.INVALID_ARGUMENT, `request body is not a JSON object: ${(err as Error).message}`));
      }
    });
    req.once('error', reject);
  });
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
export function createJoinRoutes(authority: () => AgentAuthority, caPem: () => string, logger?: Logger): (req: IncomingMessage, res: ServerResponse) => boolean {
  const log = componentLogger(logger, 'join');
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
    readJson(req)
      .then((body) =>
        path === AGENT_JOIN_PATH
          ? authority().join({ token: body.token, name: body.name, csr: body.csr })
          : authority().renew(tlsFacts(req), { csr: body.csr }),
      )
      .then(
        (issued) => sendJson(res, 200, issued),
        (err: unknown) => {
          const error = isGateError(err) ? err : new GateError(ErrorCodes.JOIN_FAILED, (err as Error).message, { cause: err });
          log.warn({ remote, path, code: error.code }, `agent ${path === AGENT_JOIN_PATH ? 'join' : 'renewal'} refused: ${error.message}`);
          if (!res.headersSent && !res.destroyed) sendJson(res, statusOf(error.code), { error: { code: error.code, message: error.message } });
        },
      );
    return true;
  };
}
