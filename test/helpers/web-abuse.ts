/**
 * Raw HTTP/1.1-over-TLS clients for attacking the proxy's web endpoints: one request per fresh
 * connection, the answer read as status and `error.code`. Raw sockets rather than node:https so a
 * body can be dribbled, announced larger than sent, or never finished.
 */
import { connect as netConnect } from 'node:net';
import { connect, type TLSSocket } from 'node:tls';

export interface WebTarget {
  host: string;
  port: number;
  ca: string;
}

export interface WebAnswer {
  status: number;
  /** `error.code` of a JSON refusal, else undefined. */
  code: string | undefined;
  body: string;
}

export interface RequestOptions {
  method?: string;
  body?: string | Buffer;
  headers?: Record<string, string | number>;
  /** Send the body (with `head`: the request line and headers too) `chunkBytes` at a time, one chunk every `everyMs` (a slow client). */
  dribble?: { chunkBytes: number; everyMs: number; head?: boolean };
  /** Client certificate for the TLS handshake (renewal). */
  cert?: string;
  key?: string;
  /** Give up after this (the answer is then status 0, code 'no-answer'). */
  giveUpMs?: number;
  /** Send a PROXY v1 header first, claiming this client IPv4 address (as a trusted balancer would). */
  proxyFrom?: string;
}

function parse(text: string): WebAnswer {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  let code: string | undefined;
  try {
    code = (JSON.parse(body) as { error?: { code?: string } }).error?.code;
  } catch {
    code = undefined;
  }
  return { status, code, body };
}

/** One request on a fresh TLS connection; resolves once the server has answered and closed or the answer is complete. */
export function webRequest(target: WebTarget, path: string, options: RequestOptions = {}): Promise<WebAnswer> {
  const body = options.body === undefined ? Buffer.alloc(0) : Buffer.from(options.body);
  const headers = {
    Host: 'localhost',
    Connection: 'close',
    'Content-Type': 'application/json',
    'Content-Length': body.length,
    ...options.headers,
  };
  const head = `${options.method ?? 'POST'} ${path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n')}\r\n\r\n`;
  return new Promise((resolve) => {
    const header = options.proxyFrom === undefined ? undefined : `PROXY TCP4 ${options.proxyFrom} 127.0.0.1 40000 ${target.port}\r\n`;
    const raw = header === undefined ? undefined : netConnect({ host: target.host, port: target.port }, () => raw!.write(header));
    const socket: TLSSocket = connect({
      ...(raw ? { socket: raw } : { host: target.host, port: target.port }),
      servername: 'localhost',
      ca: target.ca,
      ALPNProtocols: ['http/1.1'],
      ...(options.cert ? { cert: options.cert, key: options.key } : {}),
    });
    let text = '';
    let dribbler: NodeJS.Timeout | undefined;
    const done = (answer: WebAnswer): void => {
      clearInterval(dribbler);
      clearTimeout(giveUp);
      socket.destroy();
      resolve(answer);
    };
    const giveUp = setTimeout(() => done({ status: 0, code: 'no-answer', body: text }), options.giveUpMs ?? 10_000);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      const answer = parse(text);
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1] ?? -1);
      if (answer.status > 0 && length >= 0 && Buffer.byteLength(answer.body) >= length) done(answer);
    });
    socket.on('error', () => done(text ? parse(text) : { status: 0, code: 'connection-error', body: '' }));
    socket.on('end', () => done(parse(text)));
    socket.once('secureConnect', () => {
      if (!options.dribble) {
        socket.write(head);
        socket.write(body);
        return;
      }
      const { chunkBytes, everyMs } = options.dribble;
      const slow = options.dribble.head ? Buffer.concat([Buffer.from(head), body]) : body;
      if (!options.dribble.head) socket.write(head);
      let sent = 0;
      dribbler = setInterval(() => {
        if (sent >= slow.length || socket.destroyed) return clearInterval(dribbler);
        socket.write(slow.subarray(sent, sent + chunkBytes));
        sent += chunkBytes;
      }, everyMs);
    });
  });
}

/** `count` requests from `make(i)`, at most `concurrency` in flight. */
export async function inParallel<T>(count: number, concurrency: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array<T>(count);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      results[i] = await make(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  return results;
}
