// A Kubernetes API server stand-in for kubectl: TLS with its own CA, client certificates
// required, `/version` and `/healthz`; it records the server name and client certificate it saw.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { CertificateAuthority } from '../../lib/pki/certificate-authority.js';

export const CLUSTER_NAME = 'kube-gate-proxy-alpn.cluster.test';
export const GIT_VERSION = 'v1.32.4-gate-interop';

export interface Seen {
  path: string;
  servername: string;
  clientCn: string;
}

/** An API-server stand-in: TLS with its own CA, client certificates required, /version and /healthz. */
export async function startApiServer(ca: CertificateAuthority): Promise<{ port: number; seen: Seen[]; refused: string[]; server: Server }> {
  const pair = ca.issue({ commonName: CLUSTER_NAME, dnsNames: [CLUSTER_NAME], usage: 'server' });
  const seen: Seen[] = [];
  const server = createServer({ ...pair, ca: [ca.cert], requestCert: true, rejectUnauthorized: true }, (req, res) => {
    const socket = req.socket as TLSSocket;
    const subject = socket.getPeerCertificate().subject as { CN?: string } | undefined;
    // kubectl adds `?timeout=` from --request-timeout.
    const path = new URL(req.url ?? '/', 'https://api.invalid').pathname;
    seen.push({ path, servername: (socket as TLSSocket & { servername?: string }).servername ?? '', clientCn: subject?.CN ?? '' });
    res.setHeader('Content-Type', 'application/json');
    if (path === '/version') {
      res.end(
        JSON.stringify({
          major: '1',
          minor: '32',
          gitVersion: GIT_VERSION,
          gitCommit: '0000000',
          gitTreeState: 'clean',
          buildDate: '2026-01-01T00:00:00Z',
          goVersion: 'go1.23',
          compiler: 'gc',
          platform: 'linux/amd64',
        }),
      );
    } else if (path === '/healthz') {
      res.setHeader('Content-Type', 'text/plain');
      res.end('ok');
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 404 }));
    }
  });
  const refused: string[] = [];
  server.on('tlsClientError', (err: Error & { code?: string }) => refused.push(err.code ?? err.message));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { port: (server.address() as AddressInfo).port, seen, refused, server };
}
