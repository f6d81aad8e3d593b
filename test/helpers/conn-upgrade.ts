// Hostile and hand-made connection upgrades, on the wire: a raw HTTP/1.1 upgrade request (over
// TCP or TLS) and client WebSocket frames built byte by byte, so tests can send what no
// well-behaved library would (a missing key, a text frame, a frame over the limit, fragments).
// Any endpoint that serves `GET /webapi/connectionupgrade` can be driven with these.
import { randomBytes } from 'node:crypto';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { once } from 'node:events';
import { CONNECTION_UPGRADE_PATH } from '../../lib/wire/names.js';
import type { Logger } from '../../lib/log.js';

/**
 * A logger that keeps the code and client address of every warn/info line with a code: what the
 * multiplexer logs for a failed connection, so a test can see the address an upgraded stream was
 * recorded with.
 */
export function failureLogger(): { logger: Logger; failures: Array<{ code: string; remote?: string }> } {
  const failures: Array<{ code: string; remote?: string }> = [];
  const record = (o: { code?: string; remote?: string }): void => {
    if (o.code) failures.push({ code: o.code, ...(o.remote ? { remote: o.remote } : {}) });
  };
  const ignore = (): void => {};
  const logger = {
    level: 'info',
    child: () => logger,
    warn: record,
    info: record,
    error: ignore,
    debug: ignore,
    trace: ignore,
    fatal: ignore,
    silent: ignore,
  } as unknown as Logger;
  return { logger, failures };
}

export interface RawUpgradeOptions {
  port: number;
  host?: string;
  /** TLS to the endpoint (its options); plain TCP when absent. */
  tls?: ConnectionOptions;
  method?: string;
  path?: string;
  /** Headers replacing the well-formed defaults; a value of undefined leaves the header out. */
  headers?: Record<string, string | undefined>;
  /** Sent in cleartext before anything else, as a balancer speaking PROXY protocol sends its header. */
  proxyHeader?: string;
}

export interface RawUpgrade {
  socket: Socket | TLSSocket;
  /** The status line's code. */
  status: number;
  /** The response head and whatever followed it in the same reads. */
  head: string;
  /** Bytes after the head (a refusal's body, or the first frames). */
  rest: Buffer;
}

export function upgradeHeaders(): Record<string, string> {
  return {
    Host: 'gate.test',
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
    'Sec-WebSocket-Version': '13',
    'Sec-WebSocket-Protocol': 'alpn',
  };
}

/** Sends one upgrade request and reads the response head (bounded: 5 s). */
export async function rawUpgrade(options: RawUpgradeOptions): Promise<RawUpgrade> {
  const host = options.host ?? '127.0.0.1';
  let socket: Socket | TLSSocket = netConnect({ host, port: options.port });
  await once(socket, 'connect');
  if (options.proxyHeader !== undefined) socket.write(options.proxyHeader);
  if (options.tls) {
    socket = tlsConnect({ socket, ALPNProtocols: ['http/1.1'], ...options.tls });
    await once(socket, 'secureConnect');
  }
  const headers: Record<string, string | undefined> = { ...upgradeHeaders(), ...options.headers };
  const lines = [`${options.method ?? 'GET'} ${options.path ?? CONNECTION_UPGRADE_PATH} HTTP/1.1`];
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) lines.push(`${name}: ${value}`);
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  let buffered = Buffer.alloc(0);
  const timer = setTimeout(() => socket.destroy(new Error('no upgrade answer within 5 s')), 5000);
  try {
    for await (const chunk of socket.iterator({ destroyOnReturn: false })) {
      buffered = Buffer.concat([buffered, chunk as Buffer]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = buffered.subarray(0, end).toString('latin1');
        // Stop iterating without destroying the socket: the caller goes on with it.
        return { socket, status: Number(head.split(' ')[1]), head, rest: buffered.subarray(end + 4) };
      }
    }
  } finally {
    clearTimeout(timer);
  }
  return { socket, status: 0, head: buffered.toString('latin1'), rest: Buffer.alloc(0) };
}

export const Opcode = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

/** A client frame (masked, as RFC 6455 §5.3 requires of clients). */
export function clientFrame(opcode: number, payload: Buffer, fin = true): Buffer {
  const mask = randomBytes(4);
  const len = payload.length;
  const head = len < 126 ? Buffer.alloc(2) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = (fin ? 0x80 : 0) | opcode;
  if (len < 126) head[1] = 0x80 | len;
  else if (len < 65536) {
    head[1] = 0x80 | 126;
    head.writeUInt16BE(len, 2);
  } else {
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(len), 2);
  }
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i]! ^= mask[i % 4]!;
  return Buffer.concat([head, mask, body]);
}

/**
 * Reads server frames, giving each to `take` until it returns something other than undefined,
 * which is returned. 'ended': the socket ended first; 'stalled': nothing of the kind within
 * `limitMs` (the socket is then destroyed). The socket is destroyed when done, unless `keepOpen`
 * (a client that stays connected and silent: it never answers pings).
 */
export async function readFrames<T>(
  socket: Socket,
  initial: Buffer,
  take: (opcode: number, payload: Buffer) => T | undefined,
  limitMs = 5000,
  keepOpen = false,
): Promise<T | 'ended' | 'stalled'> {
  let buf = initial;
  let stalled = false;
  const timer = setTimeout(() => {
    stalled = true;
    socket.destroy();
  }, limitMs);
  const parse = (): T | undefined => {
    while (buf.length >= 2) {
      const opcode = buf[0]! & 0x0f;
      let len = buf[1]! & 0x7f;
      let at = 2;
      if (len === 126) {
        if (buf.length < 4) return undefined;
        len = buf.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (buf.length < 10) return undefined;
        len = Number(buf.readBigUInt64BE(2));
        at = 10;
      }
      if (buf.length < at + len) return undefined;
      const taken = take(opcode, buf.subarray(at, at + len));
      buf = buf.subarray(at + len);
      if (taken !== undefined) return taken;
    }
    return undefined;
  };
  try {
    const first = parse();
    if (first !== undefined) return first;
    for await (const chunk of socket.iterator({ destroyOnReturn: false })) {
      buf = Buffer.concat([buf, chunk as Buffer]);
      const found = parse();
      if (found !== undefined) return found;
    }
    return stalled ? 'stalled' : 'ended';
  } catch {
    return stalled ? 'stalled' : 'ended';
  } finally {
    clearTimeout(timer);
    if (!keepOpen) socket.destroy();
  }
}

/** The close code the server sends (1005 for a close frame without one), or how reading ended. */
export function closeCode(socket: Socket, initial: Buffer = Buffer.alloc(0), limitMs = 5000): Promise<number | 'ended' | 'stalled'> {
  return readFrames(
    socket,
    initial,
    (opcode, payload) => (opcode === Opcode.close ? (payload.length >= 2 ? payload.readUInt16BE(0) : 1005) : undefined),
    limitMs,
  );
}
