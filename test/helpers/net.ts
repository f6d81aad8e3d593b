import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket, type ConnectionOptions } from 'node:tls';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { devCertificates } from '../../lib/pki/dev-certificates.js';

export async function listening(server: Server, host = '127.0.0.1'): Promise<number> {
  server.listen(0, host);
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * A half-open TCP server on 127.0.0.1 that hands each connection to `onSocket` and keeps the open
 * ones in `sockets` (to destroy what a test's upstream still holds at the end).
 */
export function trackedServer(onSocket: (s: Socket) => void): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const srv = createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    onSocket(s);
  });
  return new Promise((resolve) =>
    srv.listen(0, '127.0.0.1', () => resolve({ server: srv, port: (srv.address() as AddressInfo).port, sockets })),
  );
}

/** A plain TCP upstream that greets with `tag\n`, then echoes; half-open so tests see FIN order. */
export async function startTaggedTcpServer(tag: string): Promise<{ port: number; server: Server; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.write(`${tag}\n`);
    socket.pipe(socket);
  });
  return { port: await listening(server), server, sockets };
}

/** A TLS upstream (dev certificate) that answers `tag sni=.. alpn=..\n` then echoes. */
export async function startTaggedTlsServer(
  tag: string,
  alpn: string[] = ['h2', 'http/1.1', 'gate-bench', 'gate-postgres', 'gate-reversetunnel'],
): Promise<{ port: number; server: Server }> {
  const { server: pair } = devCertificates();
  const server = createTlsServer({ ...pair, ALPNProtocols: alpn }, (socket) => {
    socket.on('error', () => {});
    socket.write(`${tag} sni=${socket.servername || '-'} alpn=${socket.alpnProtocol || '-'}\n`);
    socket.pipe(socket);
  });
  return { port: await listening(server), server };
}

/**
 * Reads from a stream until `predicate(text)` holds or the stream ends, leaving the stream open
 * (a `for await` loop would destroy it on early return). Rejects on a stream error.
 */
export function readUntil(stream: NodeJS.ReadableStream, predicate: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const cleanup = (): void => {
      stream.removeListener('data', onData);
      stream.removeListener('end', onEnd);
      stream.removeListener('error', onError);
    };
    const onData = (chunk: Buffer | string): void => {
      text += chunk.toString();
      if (predicate(text)) {
        cleanup();
        stream.pause();
        resolve(text);
      }
    };
    const onEnd = (): void => {
      cleanup();
      resolve(text);
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onError);
    stream.resume();
  });
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += chunk.toString();
  return text;
}

/** TLS client trusting the dev CA. Resolves on secureConnect, rejects on error. */
export async function tlsClient(port: number, options: ConnectionOptions = {}): Promise<TLSSocket> {
  const socket = tlsConnect({ host: '127.0.0.1', port, ca: devCertificates().ca.cert, ...options });
  await Promise.race([once(socket, 'secureConnect'), once(socket, 'error').then(([err]) => Promise.reject(err))]);
  return socket;
}

/** Plain TCP client. `allowHalfOpen` keeps our side writable after the peer's FIN (default off). */
export async function tcpClient(port: number, options: { host?: string; allowHalfOpen?: boolean } = {}): Promise<Socket> {
  const socket = connect({ host: options.host ?? '127.0.0.1', port, allowHalfOpen: options.allowHalfOpen ?? false });
  await once(socket, 'connect');
  return socket;
}

/** Runs a command, resolving with exit code and output (stdin closed unless `input` given). */
export interface RunOptions {
  input?: string;
  /** Keep stdin open until stdout satisfies this (for clients that quit at stdin EOF). */
  closeStdinWhen?: (stdout: string) => boolean;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

export function run(
  cmd: string,
  args: string[],
  options: RunOptions = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env: options.env ?? process.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
      if (options.closeStdinWhen?.(stdout)) child.stdin.end();
    });
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 20_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.on('error', () => {}); // the child may exit before reading its input
    if (options.input !== undefined) child.stdin.write(options.input);
    if (!options.closeStdinWhen) child.stdin.end();
  });
}

/** Counts live libuv handles of the kinds that would keep a process alive after close(). */
export function liveHandles(): { sockets: number; servers: number; timers: number } {
  const info = process.getActiveResourcesInfo();
  return {
    sockets: info.filter((r) => r === 'TCPSocketWrap' || r === 'TLSWrap').length,
    servers: info.filter((r) => r === 'TCPServerWrap').length,
    timers: info.filter((r) => r === 'Timeout').length,
  };
}

/**
 * Waits (polling, bounded) until `condition`, sync or async, holds. Polled rather than awaited as an
 * event: the server side of a connection notices a close a moment after the client does, and
 * cluster members refresh on unref'd timers, so awaiting one of their events could let a test's
 * event loop empty. A condition that throws counts as not yet; the last error is the timeout's cause.
 */
export async function until(condition: () => boolean | Promise<boolean>, what = 'condition', limitMs = 15_000): Promise<void> {
  const start = Date.now();
  let lastError: unknown;
  const holds = (): Promise<boolean> =>
    Promise.resolve()
      .then(condition)
      .catch((err: unknown) => {
        lastError = err;
        return false;
      });
  while (!(await holds())) {
    if (Date.now() - start > limitMs) throw new Error(`timed out waiting for ${what}`, lastError === undefined ? {} : { cause: lastError });
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Reads until at least `n` characters arrived (stream left open). */
export function readBytes(stream: NodeJS.ReadableStream, n: number): Promise<string> {
  return readUntil(stream, (s) => s.length >= n);
}

/** Writes `text` to an echoing peer and resolves with what came back once as long. */
export function echoOnce(socket: NodeJS.ReadWriteStream, text: string): Promise<string> {
  const answer = readBytes(socket, text.length);
  socket.write(text);
  return answer;
}

/**
 * A TCP server that accepts and never answers (a TLS server stuck before its ServerHello, a
 * stalled upstream). `held` holds the accepted sockets; teardown destroys them and closes.
 */
export async function startMuteServer(t: { teardown(fn: () => unknown): unknown }): Promise<{ address: string; held: Set<Socket> }> {
  const held = new Set<Socket>();
  const server = createServer((s) => {
    held.add(s);
    s.on('error', () => undefined);
  });
  const port = await listening(server);
  t.teardown(() => {
    for (const s of held) s.destroy();
    return closeServer(server);
  });
  return { address: `127.0.0.1:${port}`, held };
}

/**
 * A TCP relay to `port` whose existing connections can be frozen: bytes stop and nothing closes,
 * not even when one side closes (a NAT that dropped the flow passes no FIN or reset either).
 * Connections made after a freeze relay normally. Everything is destroyed at teardown.
 */
export async function freezableRelay(t: { teardown(fn: () => unknown): unknown }, port: number): Promise<{ port: number; freeze(): void }> {
  const pairs = new Set<[Socket, Socket]>();
  const frozen = new Set<[Socket, Socket]>();
  const relay = createServer((inbound) => {
    const outbound = connect(port, '127.0.0.1');
    const pair: [Socket, Socket] = [inbound, outbound];
    pairs.add(pair);
    for (const s of pair) {
      s.on('error', () => {});
      s.once('close', () => {
        if (frozen.has(pair)) return; // the dead path carries no close; teardown ends it
        pairs.delete(pair);
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  const relayPort = await listening(relay);
  t.teardown(() => {
    for (const pair of pairs) for (const s of pair) s.destroy();
    return closeServer(relay);
  });
  return {
    port: relayPort,
    freeze: () => {
      for (const pair of pairs) {
        const [a, b] = pair;
        frozen.add(pair);
        a.unpipe(b);
        b.unpipe(a);
        a.pause();
        b.pause();
      }
    },
  };
}

/**
 * A port on 127.0.0.1 that refuses connections and that no `listen(0)` will take: below the
 * kernel's ephemeral range (net.ipv4.ip_local_port_range), checked to refuse now. A port freed by
 * closing a listener is not enough: the next `listen(0)` in this process or another test's may get
 * it, and a dial meant to be refused lands on that listener instead.
 */
export async function refusedPort(): Promise<number> {
  const range = await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').catch(() => '32768 60999');
  const low = Number(range.trim().split(/\s+/)[0]) || 32768;
  for (let port = low - 1; port > low - 200 && port > 1024; port--) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
    });
    if (refused) return port;
  }
  throw new Error(`no refusing port below ${low} on 127.0.0.1`);
}
