import { createPrivateKey, X509Certificate } from 'node:crypto';
import { link, mkdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { SecureContextOptions } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import { CertificateAuthority, type KeyPair } from '../pki/certificate-authority.js';
import { privateToOwner } from '../pki/private-file.js';
import type { GateConfig } from '../config/types.js';
import { PEER_ROLE_URI } from '../wire/names.js';

/** The certificates the proxy terminates TLS with. */
export interface ProxyCertificates {
  /** Default key pair (the first of https_keypairs, or the one issued by the cluster CA). */
  default: KeyPair;
  /** Further key pairs by the DNS names in their subjectAltName, for SNI selection. */
  bySni: Record<string, SecureContextOptions>;
  /** The cluster CA's certificate file, when the web port uses certificates the proxy made itself. */
  caFile: string | undefined;
  /**
   * The cluster CA in `data_dir`: it signs agents' client certificates and the proxy's own server
   * certificate for the tunnel route, whatever https_keypairs says, because agents trust exactly
   * this CA (pinned when they join), not the public web PKI.
   */
  clusterCa: CertificateAuthority;
  /** Its certificate file (always written). */
  clusterCaFile: string;
  /** The server key pair issued by the cluster CA, for the tunnel route. */
  clusterServer: KeyPair;
  /**
   * Set when `clusterServer` was issued now (the files in `data_dir` were missing, or do not fit
   * this CA and these names): the proxy writes it there with `saveServerCertificate` once its
   * listeners are bound, so a start that fails changes nothing on disk.
   */
  serverToSave: { dataDir: string; pair: KeyPair } | undefined;
  /**
   * This proxy's peering identity: issued by the cluster CA at each start, kept in
   * memory only, for both ends of peering (server and client authentication), with the proxy role
   * (`PEER_ROLE_URI`) that agent and client certificates never carry.
   */
  peer: KeyPair;
}

async function readKeyPair(certFile: string, keyFile: string): Promise<KeyPair> {
  try {
    return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
  } catch (err) {
    throw new GateError(
      ErrorCodes.CONFIG_INVALID,
      `proxy_service.https_keypairs: cannot read ${certFile} / ${keyFile}: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/** DNS names of a certificate's subjectAltName (lower case), for SNI selection. */
function dnsNames(cert: string): string[] {
  const san = new X509Certificate(cert).subjectAltName ?? '';
  return san
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4).toLowerCase());
}

async function exists(path: string): Promise<boolean> {
  return readFile(path).then(
    () => true,
    () => false,
  );
}

/** Milliseconds a proxy waits for another one that is writing the shared CA (see `clusterAuthority`). */
const CA_WRITE_WAIT_MS = 5_000;

/**
 * The cluster CA in `dataDir`, made at first start and kept, so agents that pinned it keep trusting it.
 *
 * Several proxies of one cluster may share one `data_dir` and start together: they
 * must end up with the same CA, or their peering and agents' pins would split. So the key file
 * is the lock: a new CA's key is written to a temporary file and hard-linked to `ca-key.pem`,
 * which fails with EEXIST for every proxy but one; the winner then renames the certificate into
 * place, and the others wait (bounded) until it is there and load the winner's pair.
 */
async function clusterAuthority(dataDir: string): Promise<{ ca: CertificateAuthority; caFile: string }> {
  const caFile = join(dataDir, 'ca.pem');
  const caKeyFile = join(dataDir, 'ca-key.pem');
  let ca: CertificateAuthority | undefined;
  if (!(await exists(caKeyFile))) {
    await mkdir(dataDir, { recursive: true, mode: 0o700 }).catch((err: unknown) => {
      throw cannotWrite(dataDir, err);
    });
    const made = CertificateAuthority.create('gate-mux proxy development CA');
    const tag = `${process.pid}-${Math.random().toString(36).slice(2)}`;
    const keyTemp = join(dataDir, `.ca-key.pem.${tag}`);
    const certTemp = join(dataDir, `.ca.pem.${tag}`);
    await writeFile(keyTemp, made.key, { mode: 0o600 }).catch((err: unknown) => {
      throw cannotWrite(dataDir, err);
    });
    try {
      await link(keyTemp, caKeyFile);
      await writeFile(certTemp, made.cert);
      await rename(certTemp, caFile);
      ca = made;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      await unlink(keyTemp).catch(() => {});
    }
  }
  if (!ca) {
    // Another proxy made the key: its certificate follows at once, unless it died in between.
    for (let waited = 0; !(await exists(caFile)); waited += 50) {
      if (waited >= CA_WRITE_WAIT_MS)
        throw new GateError(
          ErrorCodes.CONFIG_INVALID,
          `${caKeyFile} exists but ${caFile} does not: remove the key, or put its certificate back`,
        );
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    ca = CertificateAuthority.fromPem(await readKeyPair(caFile, caKeyFile));
  }
  // Only when it is not private already: a provisioned read-only data_dir must start.
  await privateToOwner(caKeyFile);
  return { ca, caFile };
}

/** A data_dir that has no CA yet and cannot be written: say what to provision. */
function cannotWrite(dataDir: string, err: unknown): GateError {
  const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  return new GateError(
    ErrorCodes.CONFIG_INVALID,
    `data_dir ${dataDir} has no cluster CA and cannot be written (${code}): make it writable, or provision ca.pem and ca-key.pem in it`,
    { cause: err },
  );
}

/** Errors of a file system or directory the proxy may not write: a provisioned read-only data_dir. */
const READ_ONLY = new Set(['EROFS', 'EACCES', 'EPERM']);

/**
 * This proxy's peering certificate. Why a URI subjectAltName for the role: the cluster CA also
 * signs agents' certificates (clientAuth, named by CN or DNS SAN) and the tunnel route's server
 * certificate (serverAuth), so neither the chain nor the key usage tells a proxy apart; a URI SAN
 * is a field no agent name is read from (lib/tunnel/agent-identity.ts) and no CSR can put in an
 * agent's certificate (the CA sets every extension itself), and it is how SPIFFE names workloads.
 * The key never leaves memory: a new one at each start and reload.
 */
function peerCertificate(ca: CertificateAuthority): KeyPair {
  return ca.issue({ commonName: 'gate-mux proxy', uris: [PEER_ROLE_URI], usage: 'both', days: 30 });
}

/** A server certificate in `data_dir` is reused while it has at least this long left. */
const SERVER_REUSE_MIN_MS = 30 * 24 * 3600 * 1000;

/**
 * The server certificate in `dataDir` when it is this CA's, for every one of `names`, with its
 * key, and not near its end; else undefined. Reusing it means that a second proxy on the same
 * `data_dir` (another of the cluster, or one started by mistake) never replaces the file a running
 * proxy's certificate came from.
 */
async function fittingServerCertificate(dataDir: string, ca: CertificateAuthority, names: string[]): Promise<KeyPair | undefined> {
  let pair: KeyPair;
  try {
    pair = { cert: await readFile(join(dataDir, 'server.pem'), 'utf8'), key: await readFile(join(dataDir, 'server-key.pem'), 'utf8') };
  } catch {
    return undefined;
  }
  try {
    const cert = new X509Certificate(pair.cert);
    const issuer = new X509Certificate(ca.cert);
    if (!cert.checkIssued(issuer) || !cert.verify(issuer.publicKey)) return undefined;
    if (!cert.checkPrivateKey(createPrivateKey(pair.key))) return undefined;
    if (Date.parse(cert.validTo) - Date.now() < SERVER_REUSE_MIN_MS) return undefined;
    const covered = names.every(
      (name) => (isIP(name) === 0 ? cert.checkHost(name, { wildcards: false }) : cert.checkIP(name)) !== undefined,
    );
    return covered ? pair : undefined;
  } catch {
    return undefined; // unreadable: issue a new one
  }
}

/**
 * Writes the server certificate and key into `dataDir` (after the proxy's listeners are bound):
 * each through a temporary file renamed into place, so no reader sees half of one. The proxy
 * serves the pair it holds in memory, so a read-only data_dir (provisioned in advance) goes
 * without the files: the next start issues again.
 */
export async function saveServerCertificate(dataDir: string, pair: KeyPair): Promise<void> {
  const tag = `${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    for (const [file, text, mode] of [
      ['server-key.pem', pair.key, 0o600],
      ['server.pem', pair.cert, 0o644],
    ] as Array<[string, string | Buffer, number]>) {
      const temp = join(dataDir, `.${file}.${tag}`);
      await writeFile(temp, text, { mode });
      await rename(temp, join(dataDir, file)).catch(async (err: unknown) => {
        await unlink(temp).catch(() => {});
        throw err;
      });
    }
  } catch (err) {
    if (!READ_ONLY.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
  }
}

/**
 * The server certificate for the names the configuration uses (public and listen addresses): the
 * one in `data_dir` when it fits, else a new one, which is saved only once the listeners are bound.
 */
async function clusterServerCertificate(
  config: GateConfig,
  ca: CertificateAuthority,
  dataDir: string,
): Promise<{ pair: KeyPair; issued: boolean }> {
  const p = config.proxy;
  const hosts = new Set(['localhost', 'kube.gate.cluster.local', '127.0.0.1', '::1']);
  for (const address of [
    p.webListenAddr,
    ...p.publicAddrs,
    ...p.sshPublicAddrs,
    ...p.tunnelPublicAddrs,
    ...p.postgresPublicAddrs,
    ...p.mysqlPublicAddrs,
  ]) {
    if (address.host && address.host !== '0.0.0.0' && address.host !== '::') hosts.add(address.host.toLowerCase());
  }
  const names = [...hosts];
  const existing = await fittingServerCertificate(dataDir, ca, names);
  if (existing) return { pair: existing, issued: false };
  const server = ca.issue({
    commonName: names.find((h) => isIP(h) === 0) ?? 'localhost',
    dnsNames: names.filter((h) => isIP(h) === 0),
    ipAddresses: names.filter((h) => isIP(h) !== 0),
    usage: 'server',
  });
  return { pair: server, issued: true };
}

/**
 * The cluster CA and its server certificate from `data_dir` (made when absent); the web port
 * terminates with https_keypairs when configured, else with that same server certificate.
 */
export async function loadProxyCertificates(config: GateConfig, fallbackDataDir = '.data'): Promise<ProxyCertificates> {
  const dataDir = config.dataDir ?? fallbackDataDir;
  const { ca, caFile } = await clusterAuthority(dataDir);
  const server = await clusterServerCertificate(config, ca, dataDir);
  const clusterServer = server.pair;
  const cluster = {
    clusterCa: ca,
    clusterCaFile: caFile,
    clusterServer,
    serverToSave: server.issued ? { dataDir, pair: clusterServer } : undefined,
    peer: peerCertificate(ca),
  };
  const pairs = config.proxy.httpsKeypairs;
  if (pairs.length === 0) return { default: clusterServer, bySni: {}, caFile, ...cluster };
  const loaded = await Promise.all(pairs.map((p) => readKeyPair(p.certFile, p.keyFile)));
  const bySni: Record<string, SecureContextOptions> = {};
  for (const pair of loaded.slice(1)) for (const name of dnsNames(pair.cert)) bySni[name] ??= pair;
  return { default: loaded[0]!, bySni, caFile: undefined, ...cluster };
}
