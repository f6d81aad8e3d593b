import type { TLSSocket } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import { verifyErrorCode } from '../tunnel/admission.js';
import { PEER_ROLE_URI } from '../wire/names.js';

/** What one end of a peering connection knows of the other's certificate once TLS is done. */
export interface PeerTlsFacts {
  /** True when the certificate verified against the cluster CA. */
  authorized: boolean;
  /** OpenSSL's verification error code, when not authorized. */
  authorizationError: string | undefined;
  /** `subjectaltname` as Node prints it (`DNS:a, URI:urn:…`), or undefined when no certificate came. */
  subjectAltName: string | undefined;
  /** False when the other end sent no certificate at all. */
  hasCertificate: boolean;
}

/** True when a `subjectaltname` text carries the proxy role (`URI:` + PEER_ROLE_URI). */
export function hasProxyRole(subjectAltName: string | undefined): boolean {
  return (subjectAltName ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .includes(`URI:${PEER_ROLE_URI}`);
}

/**
 * Decides whether the other end of a peering connection is a proxy of this cluster: a certificate
 * from the cluster CA that carries the proxy role. Agents and clients hold certificates from the
 * same CA, so the chain alone is not enough (lib/proxy/certificates.ts says why the role is a URI
 * SAN). Pure; throws GATE_ERR_PEER_REFUSED saying which check failed.
 */
export function admitPeer(facts: PeerTlsFacts): void {
  if (!facts.hasCertificate)
    throw new GateError(ErrorCodes.PEER_REFUSED, 'no certificate: the peering port serves proxies of this cluster only');
  if (!facts.authorized) {
    throw new GateError(
      ErrorCodes.PEER_REFUSED,
      `the certificate is not from this cluster's CA (${facts.authorizationError ?? 'not verified'})`,
    );
  }
  if (!hasProxyRole(facts.subjectAltName)) {
    throw new GateError(
      ErrorCodes.PEER_REFUSED,
      `the certificate is the cluster CA's but not a proxy's (no ${PEER_ROLE_URI}): an agent or client certificate`,
    );
  }
}

/** The facts `admitPeer` decides on, read from a TLS socket (either end) once its handshake is done. */
export function peerTlsFacts(socket: TLSSocket): PeerTlsFacts {
  const cert = socket.getPeerCertificate();
  const hasCertificate = cert !== null && cert !== undefined && Object.keys(cert).length > 0;
  return {
    authorized: socket.authorized,
    authorizationError: verifyErrorCode(socket.authorizationError),
    subjectAltName: hasCertificate ? cert.subjectaltname : undefined,
    hasCertificate,
  };
}
