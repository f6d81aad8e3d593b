import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import type { Teardownable } from './daemon.js';

export interface RunningServer {
  host: string;
  port: number;
  /** `host:port` */
  address: string;
  /** Connections accepted so far. */
  accepted(): number;
}

function closeOnTeardown(t: Teardownable, server: Server, sockets: Set<Socket>): void {
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
}

function listen(server: Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/**
 * TCP echo on 127.0.0.1. `greeting` is written first on accept (a server-speaks-first protocol,
 * whose first bytes a proxy may deliver in the same read as its `200`).
 */
export async function startEchoServer(t: Teardownable, options: { greeting?: string; host?: string } = {}): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    accepted++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    if (options.greeting) socket.write(options.greeting);
    socket.pipe(socket);
  });
  const port = await listen(server, host);
  closeOnTeardown(t, server, sockets);
  return { host, port, address: `${host}:${port}`, accepted: () => accepted };
}

/**
 * TLS echo on 127.0.0.1 with the dev CA's server certificate. With `alpn`, the server selects
 * the first protocol it knows in the client's list and rejects a handshake without overlap
 * (no_application_protocol) — a multiplexer route that requires ALPN. `mode: 'count'` instead
 * reads until the client half-closes, then answers `got N bytes` and ends (a half-close test).
 */
export async function startTlsEchoServer(
  t: Teardownable,
  options: { alpn?: string[]; mode?: 'echo' | 'count' } = {},
): Promise<RunningServer & { alpnSeen: Array<string | false | null> }> {
  const { server: cert, ca } = devCertificates();
  const host = '127.0.0.1';
  const sockets = new Set<Socket>();
  const alpnSeen: Array<string | false | null> = [];
  let accepted = 0;
  const server = createTlsServer(
    {
      key: cert.key,
      cert: cert.cert,
      ca: ca.cert,
      allowHalfOpen: true,
      ...(options.alpn ? { ALPNProtocols: options.alpn } : {}),
    },
    (socket: TLSSocket) => {
      alpnSeen.push(socket.alpnProtocol);
      if (options.mode === 'count') {
        let n = 0;
        socket.on('data', (d: Buffer) => (n += d.length));
        socket.on('end', () => socket.end(`got ${n} bytes`));
      } else socket.pipe(socket);
    },
  );
  server.on('connection', (socket: Socket) => {
    accepted++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('tlsClientError', () => undefined);
  const port = await listen(server, host);
  closeOnTeardown(t, server, sockets);
  return { host, port, address: `${host}:${port}`, accepted: () => accepted, alpnSeen };
}
