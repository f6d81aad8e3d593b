import { CertificateAuthority, type KeyPair } from './certificate-authority.js';

export interface DevCertificates {
  ca: CertificateAuthority;
  /** Server certificate for localhost, 127.0.0.1, ::1 and the platform's own names. */
  server: KeyPair;
  /** Client certificate (clientAuth) signed by the same CA, for mTLS tests and agents. */
  client: KeyPair;
}

let cached: DevCertificates | undefined;

/**
 * One development CA with a server and a client certificate, made once per process and cached:
 * key generation and signing cost tens of milliseconds each, and tests ask for them often.
 */
export function devCertificates(): DevCertificates {
  if (cached) return cached;
  const ca = CertificateAuthority.create();
  const server = ca.issue({
    commonName: 'localhost',
    dnsNames: ['localhost', '*.localhost', 'kube.gate.cluster.local', '*.gate.test', 'gate.test'],
    ipAddresses: ['127.0.0.1', '::1'],
    usage: 'both',
  });
  const client = ca.issue({ commonName: 'gate-mux test client', usage: 'client' });
  cached = { ca, server, client };
  return cached;
}
