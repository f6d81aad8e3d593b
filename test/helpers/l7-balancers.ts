// Real load balancers that end TLS (L7, HTTP mode), in front of a proxy under test: HAProxy and
// nginx, each terminating the client's TLS with a certificate from a CA of the test's own (not
// the proxy's cluster CA) and opening a new TLS connection to the proxy, with the WebSocket
// upgrade passed through and short idle timeouts. What an agent or psql meets behind an AWS ALB
// or an ingress controller. Started on 127.0.0.1 and a free port; stopped at teardown.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { freePort, startDaemon, type Teardownable } from './daemon.js';
import { startHaproxy } from './haproxy.js';
import { requirePeer } from './peers.js';

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

export interface BalancerCa {
  /** The balancer CA's certificate (PEM) and its file, for NODE_EXTRA_CA_CERTS. */
  cert: string;
  file: string;
  /** The balancer's own certificate and key, for localhost and 127.0.0.1. */
  pair: { cert: string; key: string };
}

/** A CA that is not the cluster's, and a certificate from it for the balancers (once per process: RSA keygen is slow). */
let made: { cert: string; pair: { cert: string; key: string } } | undefined;
export function balancerCa(t: Teardownable): BalancerCa {
  if (!made) {
    const ca = CertificateAuthority.create();
    made = {
      cert: ca.cert,
      pair: ca.issue({ commonName: 'l7-balancer.test', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '0.0.0.0'] }),
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gate-l7-ca-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'balancer-ca.pem');
  writeFileSync(file, made.cert);
  return { cert: made.cert, file, pair: made.pair };
}

export interface L7BalancerOptions {
  /** The proxy's web port on 127.0.0.1 (TLS: the balancer re-encrypts towards it). */
  proxyPort: number;
  /** The proxy's CA file: the balancer checks the proxy's certificate (for `localhost`) against it. */
  proxyCaFile: string;
  ca: BalancerCa;
  /** The balancer's idle timeouts (client, server, upgraded tunnel), in seconds. */
  idleSeconds: number;
}

export interface L7Balancer {
  name: string;
  port: number;
  address: string;
  output(): string;
}

/** HAProxy 2.x `mode http`: `timeout client` / `timeout server` / `timeout tunnel` of `idleSeconds`, X-Forwarded-For added. */
export async function startHaproxyHttp(t: PeerTest, options: L7BalancerOptions): Promise<L7Balancer | undefined> {
  const binary = requirePeer(t, 'haproxy', 'haproxy');
  if (!binary) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'gate-haproxy-http-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const pem = join(dir, 'balancer.pem');
  writeFileSync(pem, `${options.ca.pair.cert}\n${options.ca.pair.key}\n`);
  const port = await freePort('127.0.0.1');
  const idle = `${options.idleSeconds}s`;
  const daemon = await startHaproxy(
    t,
    binary,
    [
      'frontend l7',
      '  mode http',
      `  timeout client ${idle}`,
      '  option forwardfor',
      `  bind 127.0.0.1:${port} ssl crt ${pem} alpn http/1.1`,
      '  default_backend gate',
      'backend gate',
      '  mode http',
      `  timeout server ${idle}`,
      `  timeout tunnel ${idle}`,
      `  server proxy 127.0.0.1:${options.proxyPort} ssl verify required ca-file ${options.proxyCaFile} sni str(localhost) verifyhost localhost`,
    ],
    { host: '127.0.0.1', port },
  );
  return { name: 'haproxy', port, address: `127.0.0.1:${port}`, output: daemon.output };
}

/** nginx `http` reverse proxy with the usual WebSocket Upgrade headers; `proxy_read_timeout` / `proxy_send_timeout` of `idleSeconds`. */
export async function startNginxHttp(t: PeerTest, options: L7BalancerOptions): Promise<L7Balancer | undefined> {
  const binary = requirePeer(t, 'nginx', 'nginx');
  if (!binary) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'gate-nginx-http-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'balancer.crt'), options.ca.pair.cert);
  writeFileSync(join(dir, 'balancer.key'), options.ca.pair.key);
  const port = await freePort('127.0.0.1');
  const idle = `${options.idleSeconds}s`;
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log stderr warn;
${process.getuid?.() === 0 ? 'user root;' : ''}
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  map $http_upgrade $connection_upgrade { default upgrade; '' close; }
  server {
    listen 127.0.0.1:${port} ssl;
    ssl_certificate ${dir}/balancer.crt;
    ssl_certificate_key ${dir}/balancer.key;
    location / {
      proxy_pass https://127.0.0.1:${options.proxyPort};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_read_timeout ${idle};
      proxy_send_timeout ${idle};
      proxy_ssl_server_name on;
      proxy_ssl_name localhost;
      proxy_ssl_verify on;
      proxy_ssl_trusted_certificate ${options.proxyCaFile};
    }
  }
}
`,
  );
  const daemon = await startDaemon(t, {
    command: binary,
    args: ['-g', 'daemon off;', '-c', conf, '-p', dir, '-e', 'stderr'],
    host: '127.0.0.1',
    port,
  });
  return { name: 'nginx', port, address: `127.0.0.1:${port}`, output: daemon.output };
}
