import { X509Certificate } from 'node:crypto';
import { request } from 'node:http';
import { rootCertificates } from 'node:tls';
import { dialTls, type ConnectionUpgradeDial } from '../client/dial-tls.js';
import type { ProxyConfig } from '../client/proxy-config.js';
import { ErrorCodes, GateError, isGateError, type ErrorCode } from '../errors.js';
import type { Logger } from '../log.js';
import { caPin, parseCaPin } from '../pki/ca-pin.js';
import { createKeyAndRequest } from '../pki/certificate-request.js';
import { AGENT_CA_PATH, AGENT_JOIN_PATH, AGENT_RENEW_PATH, ALPN_REVERSE_TUNNEL_FRAMED } from '../wire/names.js';
import type { IssuedAgentCertificate } from './agent-authority.js';

/** How an agent reaches the proxy's web port. */
export interface JoinEndpoint {
  /** The proxy's web address, `host:port`. */
  proxy: string;
  /** SNI and the name the proxy's certificate is checked against (default: the proxy host). */
  serverName?: string;
  /** Where HTTPS_PROXY / NO_PROXY come from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Override the environment: the proxy to dial through, or null for direct. */
  dialProxy?: ProxyConfig | null;
  /** As the agent's (a load balancer that ends TLS); detected by default. */
  connectionUpgrade?: ConnectionUpgradeDial;
  /** One deadline for each exchange: dial, TLS, request and answer (default 15 s). */
  timeoutMs?: number;
  logger?: Logger;
}

/** A key pair the agent holds, with the CA it trusts for the proxy. */
export interface AgentIdentity {
  key: string;
  cert: string;
  ca: string;
}

const MAX_ANSWER_BYTES = 64 * 1024;
const KNOWN_CODES = new Set<string>(Object.values(ErrorCodes));

interface Exchange {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  /** Trust for the proxy's certificate; undefined: trust nothing yet (the CA fetch, checked by pin). */
  ca?: string | string[];
  cert?: string;
  key?: string;
}

/**
 * One HTTP/1.1 exchange with the proxy's web port over `dialTls`, so it goes through HTTPS_PROXY /
 * NO_PROXY exactly as the tunnel does. A TLS failure with a trust anchor given becomes
 * GATE_ERR_JOIN_SERVER_UNTRUSTED: the proxy presented a certificate the pinned CA did not sign.
 */
async function exchange(endpoint: JoinEndpoint, ex: Exchange): Promise<{ status: number; body: string }> {
  const timeoutMs = endpoint.timeoutMs ?? 15_000;
  const { socket } = await dialTls(endpoint.proxy, {
    alpn: ['http/1.1'],
    requireAlpn: true,
    rejectUnauthorized: ex.ca !== undefined,
    ...(ex.ca === undefined ? {} : { ca: ex.ca }),
    ...(ex.cert === undefined ? {} : { cert: ex.cert, key: ex.key }),
    ...(endpoint.serverName === undefined ? {} : { serverName: endpoint.serverName }),
    ...(endpoint.env === undefined ? {} : { env: endpoint.env }),
    ...(endpoint.dialProxy === undefined ? {} : { proxy: endpoint.dialProxy }),
    // Joining and renewing need the proxy itself (its cluster CA, our client certificate), as
    // the tunnel does: whether the path ends TLS is asked with the tunnel's ALPN, which a
    // balancer cannot answer, unlike the web's http/1.1.
    connectionUpgrade: { probeAlpn: [ALPN_REVERSE_TUNNEL_FRAMED], ...endpoint.connectionUpgrade },
    ...(endpoint.logger === undefined ? {} : { logger: endpoint.logger }),
    timeoutMs,
  }).catch((err: GateError) => {
    if (ex.ca !== undefined && err.code === ErrorCodes.TLS_HANDSHAKE) {
      throw new GateError(
        ErrorCodes.JOIN_SERVER_UNTRUSTED,
        `the proxy at ${endpoint.proxy} presented a certificate the pinned CA did not sign: ${err.message}`,
        { cause: err },
      );
    }
    throw err;
  });
  const payload = ex.body === undefined ? undefined : JSON.stringify(ex.body);
  return new Promise((resolve, reject) => {
    const fail = (err: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(
        isGateError(err)
          ? err
          : new GateError(ErrorCodes.JOIN_FAILED, `${ex.method} ${ex.path} at ${endpoint.proxy}: ${err.message}`, { cause: err }),
      );
    };
    const timer = setTimeout(
      () => fail(new GateError(ErrorCodes.JOIN_FAILED, `${ex.method} ${ex.path} at ${endpoint.proxy}: no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const req = request({
      createConnection: () => socket,
      method: ex.method,
      path: ex.path,
      host: endpoint.serverName ?? endpoint.proxy,
      headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
    });
    req.on('error', fail);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) fail(new GateError(ErrorCodes.JOIN_FAILED, `${ex.path}: answer over ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.once('end', () => {
        clearTimeout(timer);
        socket.end();
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.once('error', fail);
    });
    req.end(payload);
  });
}

/** The proxy's refusal as a GateError with its code (GATE_ERR_JOIN_FAILED when it names none we know). */
function refusal(status: number, body: string, what: string): GateError {
  let code: ErrorCode = ErrorCodes.JOIN_FAILED;
  let message = `HTTP ${status}`;
  try {
    const parsed = JSON.parse(body) as { error?: { code?: unknown; message?: unknown } };
    if (typeof parsed.error?.code === 'string' && KNOWN_CODES.has(parsed.error.code)) code = parsed.error.code as ErrorCode;
    if (typeof parsed.error?.message === 'string') message = parsed.error.message;
  } catch {
    // not JSON: keep the status
  }
  return new GateError(code, `${what} refused: ${message}`);
}

function readIssued(status: number, body: string, what: string): IssuedAgentCertificate {
  if (status !== 200) throw refusal(status, body, what);
  const parsed = JSON.parse(body) as Partial<IssuedAgentCertificate>;
  if (typeof parsed.cert !== 'string' || typeof parsed.ca !== 'string' || typeof parsed.expires !== 'string') {
    throw new GateError(ErrorCodes.JOIN_FAILED, `${what}: the answer has no certificate`);
  }
  return parsed as IssuedAgentCertificate;
}

/**
 * Fetches the cluster CA and checks it against `pin` before it is trusted for anything
 * (GATE_ERR_JOIN_PIN_MISMATCH otherwise). The TLS of this one request is not verified: the pin is
 * what makes the answer trustworthy, and nothing secret is sent.
 */
export async function fetchPinnedCa(endpoint: JoinEndpoint, pin: string): Promise<string> {
  const wanted = parseCaPin(pin);
  const { status, body } = await exchange(endpoint, { method: 'GET', path: AGENT_CA_PATH });
  if (status !== 200) throw refusal(status, body, 'fetching the CA');
  let got: string;
  try {
    got = caPin(body);
  } catch (err) {
    throw new GateError(ErrorCodes.JOIN_PIN_MISMATCH, `the proxy at ${endpoint.proxy} answered with no CA certificate`, { cause: err });
  }
  if (got !== wanted) {
    throw new GateError(
      ErrorCodes.JOIN_PIN_MISMATCH,
      `the proxy at ${endpoint.proxy} has CA ${got}, not the pinned ${wanted}: wrong proxy, or someone in between`,
    );
  }
  return body;
}

/**
 * Joins: fetches and pins the CA, makes a key (it never leaves this process), and sends a CSR with
 * the token over TLS verified against that CA (or the public roots, for a proxy whose web port has
 * an https_keypairs certificate). Resolves with the key, the short-lived certificate and the CA.
 */
export async function joinProxy(endpoint: JoinEndpoint, join: { token: string; name: string; caPin: string }): Promise<AgentIdentity> {
  const ca = await fetchPinnedCa(endpoint, join.caPin);
  const { key, csr } = createKeyAndRequest(join.name);
  const { status, body } = await exchange(endpoint, {
    method: 'POST',
    path: AGENT_JOIN_PATH,
    body: { token: join.token, name: join.name, csr },
    ca: [ca, ...rootCertificates],
  });
  const issued = readIssued(status, body, 'join');
  return { key, cert: issued.cert, ca: issued.ca };
}

/**
 * Renews: a new key and CSR, sent over mutual TLS with the current certificate (no token). The CA
 * the agent already holds verifies the proxy.
 */
export async function renewIdentity(endpoint: JoinEndpoint, current: AgentIdentity & { name: string }): Promise<AgentIdentity> {
  const { key, csr } = createKeyAndRequest(current.name);
  const { status, body } = await exchange(endpoint, {
    method: 'POST',
    path: AGENT_RENEW_PATH,
    body: { csr },
    ca: [current.ca, ...rootCertificates],
    cert: current.cert,
    key: current.key,
  });
  const issued = readIssued(status, body, 'renewal');
  return { key, cert: issued.cert, ca: issued.ca };
}

/**
 * When to renew a certificate: at two thirds of its validity, so a renewal that fails has the last
 * third to be retried in. Epoch milliseconds.
 */
export function renewalTime(certPem: string): number {
  const x509 = new X509Certificate(certPem);
  const from = Date.parse(x509.validFrom);
  const to = Date.parse(x509.validTo);
  return from + ((to - from) * 2) / 3;
}
