// An ECDSA P-256 certificate for the bench upstreams, made with the openssl CLI into the run's
// temp dir. ECDSA keeps each full handshake cheap for the upstream, so the connection-rate
// workload spends its client core on connections, not on RSA signatures.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface BenchCert {
  keyFile: string;
  certFile: string;
  key: string;
  cert: string;
}

export function makeBenchCert(dir: string): BenchCert {
  const keyFile = join(dir, 'bench-key.pem');
  const certFile = join(dir, 'bench-cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '2',
      '-subj',
      '/CN=bench.local',
      '-addext',
      'subjectAltName=DNS:bench.local,DNS:other.local',
    ],
    { stdio: 'ignore' },
  );
  return { keyFile, certFile, key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8') };
}
