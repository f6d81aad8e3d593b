/**
 * How the admin commands (`create`, `get`, `rm`, `status`, `users`, `inventory ls`) reach a proxy:
 * the admin endpoint on its web port, over mutual TLS.
 *
 * - On a proxy's host, with read access to its data_dir: the proxy's configuration (`--config`,
 *   else /etc/gate/gate.yaml, else the embedded one `gate-mux proxy` runs without --config) gives
 *   the web address and data_dir; the command signs itself a five-minute certificate with full
 *   permissions from the cluster CA's key there (whoever reads that key can sign anything).
 * - Elsewhere: `--proxy HOST:PORT --identity FILE`, the identity `gate-mux users add` wrote; the
 *   user's roles decide, read by the proxy at each request.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { request } from 'node:https';
import { connect as tcpConnect, isIP } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect, rootCertificates } from 'node:tls';
import { formatAddress, parseAddress, type HostPort } from '../config/address.js';
import { loadConfig } from '../config/load.js';
import { ErrorCodes, GateError, type ErrorCode } from '../errors.js';
import { CertificateAuthority } from '../pki/certificate-authority.js';
import { ADMIN_LOCAL_URI, ADMIN_PATH_PREFIX } from '../wire/names.js';
import { LOCAL_ADMIN_COMMON_NAME } from '../admin/admin-identity.js';
import { encodeProxyHeaderV2Local } from '../proxy-protocol/header.js';
import { defaultConfigPath } from './package-info.js';

/** Where a proxy installed from the packages keeps its configuration. */
export const INSTALLED_CONFIG_PATH = '/etc/gate/gate.yaml';
const TIMEOUT_MS = 15_000;
/** The inventory of a large fleet is tens of megabytes; more is not an answer. */
const MAX_ANSWER_BYTES = 64 << 20;
const LOCAL_IDENTITY_TTL_MS = 5 * 60_000;

/** The options every admin command takes. */
export const CONNECTION_OPTIONS = {
  config: { type: 'string' },
  proxy: { type: 'string' },
  identity: { type: 'string' },
  'server-name': { type: 'string' },
} as const;

export const CONNECTION_USAGE = `connection (one of):
  --config FILE       on a proxy's host: its configuration (default ${INSTALLED_CONFIG_PATH}, else the
                      embedded one); needs read access to its data_dir; full permissions
  --proxy HOST:PORT --identity FILE
                      elsewhere: the proxy's web address and the identity file gate-mux users add
                      wrote (--proxy defaults to the address the file names)
  --server-name NAME  the name the proxy's certificate is checked for (default: the proxy's host)
`;

export interface ConnectionFlags {
  config?: string | undefined;
  proxy?: string | undefined;
  identity?: string | undefined;
  'server-name'?: string | undefined;
}

/** A resolved way to the admin endpoint. */
export interface AdminConnection {
  address: HostPort;
  serverName: string | undefined;
  cert: string;
  key: string;
  /** What the proxy's certificate is checked against: the cluster CA and the public roots. */
  ca: string[];
  /** Who the proxy will take us for, for messages. */
  who: string;
  /** The address an identity file issued through this connection names (the proxy's public address). */
  publicAddress: string;
  /**
   * On the proxy's host, when its port takes connections from a load balancer only
   * (`proxy_protocol: on`): a PROXY v2 LOCAL header first, as the balancer's own health checks send,
   * so the proxy keeps the connection's real addresses (its trusted networks must hold this host).
   */
  proxyHeader: boolean;
}

/** The parts of an identity file. */
export interface IdentityFile {
  cert: string;
  key: string;
  ca: string[];
  proxy: string | undefined;
}

const PEM_BLOCK = /-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----\n?/g;

/** The identity file `users add` writes: a comment naming the user and proxy, the certificate, its key, the cluster CA. Pure. */
export function formatIdentityFile(
  user: string,
  proxy: string,
  issued: { cert: string; ca: string; expires: string },
  key: string,
): string {
  return [
    `# gate-mux identity of user ${user}, for the proxy at ${proxy}; valid until ${issued.expires}.`,
    '# Keep it private: it is a private key. Renew it with: gate-mux users renew --identity THIS_FILE',
    `# proxy: ${proxy}`,
    issued.cert.trimEnd(),
    key.trimEnd(),
    issued.ca.trimEnd(),
    '',
  ].join('\n');
}

/** Reads an identity file back. Pure. */
export function parseIdentityFile(text: string): IdentityFile {
  const blocks = [...text.matchAll(PEM_BLOCK)].map((m) => ({ label: m[1]!, pem: `${m[0].trimEnd()}\n` }));
  const certs = blocks.filter((b) => b.label === 'CERTIFICATE').map((b) => b.pem);
  const key = blocks.find((b) => b.label.endsWith('PRIVATE KEY'))?.pem;
  if (certs.length < 2 || key === undefined)
    throw new GateError(
      ErrorCodes.INVALID_ARGUMENT,
      'not an identity file (a certificate, its private key and the cluster CA, as gate-mux users add writes)',
    );
  const proxy = /^# proxy: (\S+)$/m.exec(text)?.[1];
  return { cert: certs[0]!, key, ca: certs.slice(1), proxy };
}

/** The configuration used on a proxy's host: --config, else the installed one, else the embedded one. */
function localConfigPath(flag: string | undefined): string {
  if (flag !== undefined) return flag;
  return existsSync(INSTALLED_CONFIG_PATH) ? INSTALLED_CONFIG_PATH : defaultConfigPath;
}

/** Resolves the flags to a connection (reads files; signs the local identity). */
export async function adminConnection(flags: ConnectionFlags): Promise<AdminConnection> {
  if (flags.identity !== undefined) {
    if (flags.config !== undefined) throw new GateError(ErrorCodes.INVALID_ARGUMENT, '--config and --identity: one or the other');
    const identity = parseIdentityFile(await readText(flags.identity, '--identity'));
    const proxy = flags.proxy ?? identity.proxy;
    if (proxy === undefined) throw new GateError(ErrorCodes.INVALID_ARGUMENT, '--proxy HOST:PORT: the identity file names no proxy');
    const parsed = parseAddress(proxy);
    if (!parsed.ok) throw new GateError(ErrorCodes.INVALID_ARGUMENT, `--proxy ${proxy}: ${parsed.reason}`);
    return {
      address: parsed.address,
      serverName: flags['server-name'] ?? (isIP(parsed.address.host) === 0 ? parsed.address.host : undefined),
      cert: identity.cert,
      key: identity.key,
      ca: [...identity.ca, ...rootCertificates],
      who: `the identity in ${flags.identity}`,
      publicAddress: formatAddress(parsed.address),
      proxyHeader: false,
    };
  }
  if (flags.proxy !== undefined)
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, '--proxy needs --identity FILE (on a proxy host, --config FILE instead)');
  const path = localConfigPath(flags.config);
  const { config } = await loadConfig(path);
  const dataDir = config.dataDir ?? '.data';
  const caCert = await readText(join(dataDir, 'ca.pem'), `the cluster CA of ${path}`);
  const caKey = await readText(join(dataDir, 'ca-key.pem'), `the cluster CA's key of ${path}`);
  const ca = CertificateAuthority.fromPem({ cert: caCert, key: caKey });
  const own = ca.issue({
    commonName: LOCAL_ADMIN_COMMON_NAME,
    uris: [ADMIN_LOCAL_URI],
    usage: 'client',
    ttlMs: LOCAL_IDENTITY_TTL_MS,
    backdateMs: 60_000,
  });
  const web = config.proxy.webListenAddr;
  const host = web.host === '0.0.0.0' || web.host === '' ? '127.0.0.1' : web.host === '::' ? '::1' : web.host;
  const publicHost = config.proxy.publicAddrs[0]?.host;
  return {
    address: { host, port: web.port },
    serverName: flags['server-name'] ?? (publicHost && isIP(publicHost) === 0 ? publicHost : 'localhost'),
    cert: own.cert,
    key: own.key,
    ca: [caCert, ...rootCertificates],
    who: `full permissions from ${join(dataDir, 'ca-key.pem')}`,
    publicAddress: formatAddress(config.proxy.publicAddrs[0] ?? { host, port: web.port }),
    proxyHeader: config.proxy.proxyProtocol === 'on',
  };
}

async function readText(path: string, what: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    const hint =
      code === 'EACCES'
        ? ": full permissions need read access to the proxy's data_dir (run as its user or root), or use --proxy HOST:PORT --identity FILE"
        : code === 'ENOENT' && what.includes('cluster CA')
          ? ': has this proxy started once? (elsewhere than a proxy host: --proxy HOST:PORT --identity FILE)'
          : '';
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `cannot read ${what} (${path}: ${code})${hint}`, { cause: err });
  }
}

/** An admin operation's answer (parsed JSON), or its refusal as a GateError with the proxy's code (and the manifest's issues). */
export async function adminCall(
  connection: AdminConnection,
  operation: string,
  body?: Record<string, unknown>,
): Promise<Record<string, unknown> & unknown> {
  const where = `https://${formatAddress(connection.address)}${ADMIN_PATH_PREFIX}${operation}`;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(
      {
        host: connection.address.host,
        port: connection.address.port,
        method: payload === undefined ? 'GET' : 'POST',
        path: `${ADMIN_PATH_PREFIX}${operation}`,
        cert: connection.cert,
        key: connection.key,
        ca: connection.ca,
        ...(connection.serverName !== undefined ? { servername: connection.serverName } : {}),
        // Without an agent: one connection per command. node:http uses createConnection only when no agent is given.
        ...(connection.proxyHeader ? { createConnection: () => withProxyHeader(connection) } : { agent: false }),
        headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        timeout: TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) {
            req.destroy(new GateError(ErrorCodes.FETCH_TOO_LARGE, `${where}: answer over ${MAX_ANSWER_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new GateError(ErrorCodes.FETCH_TIMEOUT, `${where}: no answer within ${TIMEOUT_MS / 1000} s`)));
    req.on('error', (err) =>
      reject(err instanceof GateError ? err : new GateError(ErrorCodes.FETCH_FAILED, `${where}: ${err.message}`, { cause: err })),
    );
    req.end(payload);
  });
  let answer: Record<string, unknown>;
  try {
    answer = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new GateError(
      ErrorCodes.FETCH_FAILED,
      `${where}: answered ${status} with something other than JSON (is this a gate-mux proxy's web port?)`,
      {
        cause: err,
      },
    );
  }
  if (status === 200) return answer;
  const error = (answer.error ?? {}) as { code?: unknown; message?: unknown; issues?: unknown };
  const code =
    typeof error.code === 'string' && (Object.values(ErrorCodes) as string[]).includes(error.code)
      ? (error.code as ErrorCode)
      : ErrorCodes.FETCH_FAILED;
  const refused = new GateError(code, typeof error.message === 'string' ? error.message : `${where}: answered ${status}`);
  throw refused;
}

/** The TLS connection, behind a PROXY v2 LOCAL header sent on the TCP connection first. */
function withProxyHeader(connection: AdminConnection) {
  const tcp = tcpConnect({ host: connection.address.host, port: connection.address.port });
  tcp.write(encodeProxyHeaderV2Local());
  return tlsConnect({
    socket: tcp,
    cert: connection.cert,
    key: connection.key,
    ca: connection.ca,
    ...(connection.serverName !== undefined ? { servername: connection.serverName } : {}),
    ALPNProtocols: ['http/1.1'],
  });
}
