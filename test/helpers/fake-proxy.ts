import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import type { Teardownable } from './daemon.js';

export interface FakeRequest {
  method: string;
  target: string;
  headers: Record<string, string>;
}

export type FakeBehaviour = (socket: Socket, request: FakeRequest, rest: Buffer) => void;

export interface FakeProxy {
  host: string;
  port: number;
  url: string;
  requests: FakeRequest[];
  connections(): number;
  /** Resolves when a client connection to the proxy has closed (the n-th, 1-based). */
  closed(n?: number): Promise<void>;
}

/**
 * A hand-made HTTP proxy in-process on 127.0.0.2 (TLS to the proxy with `tls: true`, using the
 * dev server certificate: verify it with servername `gate.test`). It reads one request header,
 * records it, and hands the socket to `behaviour` — which can answer like a real proxy or like a
 * hostile one. Every socket is destroyed in teardown.
 */
export async function startFakeProxy(t: Teardownable, behaviour: FakeBehaviour, options: { tls?: boolean } = {}): Promise<FakeProxy> {
  const host = '127.0.0.2';
  const requests: FakeRequest[] = [];
  const sockets = new Set<Socket>();
  const closeWaiters: Array<() => void> = [];
  let connections = 0;
  let closedCount = 0;
  const onSocket = (socket: Socket): void => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => socket.destroy());
    socket.once('close', () => {
      sockets.delete(socket);
      closedCount++;
      for (const w of closeWaiters.splice(0)) w();
    });
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.removeListener('data', onData);
      socket.pause();
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const [method = '', target = ''] = (lines[0] ?? '').split(' ');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const request = { method, target, headers };
      requests.push(request);
      behaviour(socket, request, buf.subarray(end + 4));
    };
    socket.on('data', onData);
  };
  let server: Server;
  if (options.tls) {
    const { server: cert } = devCertificates();
    server = createTlsServer({ key: cert.key, cert: cert.cert }, onSocket);
    server.on('tlsClientError', () => undefined);
  } else server = createServer(onSocket);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    host,
    port,
    url: `${options.tls ? 'https' : 'http'}://${host}:${port}`,
    requests,
    connections: () => connections,
    closed: (n = 1) =>
      new Promise<void>((resolve) => {
        const check = (): void => {
          if (closedCount >= n) resolve();
          else closeWaiters.push(check);
        };
        check();
      }),
  };
}

/**
 * A well-behaved CONNECT answer that tunnels to `address` (always a loopback test server,
 * whatever the request asked for, so no traffic leaves the machine). `early` is written in the
 * SAME write as the 200 header, the case https-proxy-agent 9 loses.
 */
export function tunnelTo(address: string, early?: Buffer | string): FakeBehaviour {
  return (socket, _request, rest) => {
    const [host = '', port = ''] = [address.slice(0, address.lastIndexOf(':')), address.slice(address.lastIndexOf(':') + 1)];
    const upstream = connect({ host, port: Number(port) }, () => {
      const head = Buffer.from('HTTP/1.1 200 Connection established\r\n\r\n');
      socket.write(early === undefined ? head : Buffer.concat([head, Buffer.from(early)]));
      if (rest.length > 0) upstream.write(rest);
      socket.pipe(upstream);
      upstream.pipe(socket);
      socket.resume();
    });
    upstream.on('error', () => socket.destroy());
    socket.once('close', () => upstream.destroy());
    upstream.once('close', () => socket.destroy());
  };
}

/** Answers with a fixed raw response, then (unless `keepOpen`) closes. */
export function answer(raw: string | Buffer, options: { keepOpen?: boolean } = {}): FakeBehaviour {
  return (socket) => {
    if (options.keepOpen) socket.write(raw);
    else socket.end(raw);
  };
}
