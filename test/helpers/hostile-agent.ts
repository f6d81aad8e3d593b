// A hostile agent for the abuse tests: a real agent certificate, a TLS connection to the proxy's
// tunnel route with the framing's ALPN, and frames written by hand with the project's own codec
// (lib/tunnel-framing/frames.ts). It does what a test tells it, nothing an agent would on its own.
import { once } from 'node:events';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { FrameReader } from '../../lib/tunnel-framing/frame-reader.js';
import {
  controlFrame,
  decodeGoAway,
  decodeOpen,
  decodeWindow,
  encodeAnswer,
  FLAG_ACK,
  FrameType,
  helloFrame,
  type GoAwayPayload,
  type OpenPayload,
  StreamKind,
} from '../../lib/tunnel-framing/frames.js';
import { ALPN_REVERSE_TUNNEL_FRAMED } from '../../lib/wire/names.js';

export interface HostileAgentOptions {
  port: number;
  /** The cluster CA (the proxy's certificate), and the agent's certificate and key. */
  ca: string;
  cert: string;
  key: string;
  /** Read what the proxy sends (default true): false leaves every byte of it unread. */
  read?: boolean;
  /**
   * Answer the describe request 404, as an agent older than descriptions does: admitted
   * undescribed. Default false: the describe request is never answered (never admitted).
   */
  admit?: boolean;
  /** A client's stream the proxy opened (kind CONNECT): the test answers it and writes to it. */
  onConnect?: (id: number, open: OpenPayload) => void;
}

export interface HostileAgent {
  socket: TLSSocket;
  goAways: GoAwayPayload[];
  /** Resolves once the proxy answered the PING sent after the describe answer (admitted). */
  admitted: Promise<void>;
  closed: Promise<void>;
  /** A frame written now; false when the socket's buffer is full (wait for 'drain'). */
  send(frame: Buffer): boolean;
  /** DATA the proxy allows on stream `id` now: the least of its credit and the connection's. */
  credit(id: number): number;
  /** `bytes` of DATA sent on stream `id`: taken from both credits. */
  spend(id: number, bytes: number): void;
}

/** The framing's windows (docs/tunnel-framing.md): 1 MiB a stream, 16 MiB the connection. */
const STREAM_WINDOW = 1 << 20;
const CONNECTION_WINDOW = 16 << 20;

const PING = Buffer.alloc(8, 7);

export async function hostileAgent(options: HostileAgentOptions): Promise<HostileAgent> {
  const socket = tlsConnect({
    host: '127.0.0.1',
    port: options.port,
    servername: 'localhost',
    ca: options.ca,
    cert: options.cert,
    key: options.key,
    ALPNProtocols: [ALPN_REVERSE_TUNNEL_FRAMED],
  });
  socket.on('error', () => {});
  // Not events.once: it would reject on the socket's 'error' (EPIPE, once the proxy cut it).
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await once(socket, 'secureConnect');
  // Its first frame, as every side's: the same windows as the proxy's (it reads its credit with them).
  socket.write(helloFrame({ streamWindow: STREAM_WINDOW, connectionWindow: CONNECTION_WINDOW, maxStreams: 1000 }));
  const goAways: GoAwayPayload[] = [];
  let admittedNow = (): void => {};
  const admitted = new Promise<void>((resolve) => (admittedNow = resolve));
  let connectionCredit = CONNECTION_WINDOW;
  const streamCredit = new Map<number, number>();
  const reader = new FrameReader((type, flags, id, payload) => {
    if (type === FrameType.GOAWAY) goAways.push(decodeGoAway(payload));
    else if (type === FrameType.WINDOW && id === 0) connectionCredit += decodeWindow(payload);
    else if (type === FrameType.WINDOW) streamCredit.set(id, (streamCredit.get(id) ?? STREAM_WINDOW) + decodeWindow(payload));
    else if (type === FrameType.PING && (flags & FLAG_ACK) === 0) socket.write(controlFrame(FrameType.PING, FLAG_ACK, 0, payload));
    else if (type === FrameType.PING) admittedNow();
    else if (type === FrameType.OPEN) {
      const open = decodeOpen(payload);
      if (open.kind === StreamKind.DESCRIBE && options.admit) {
        socket.write(controlFrame(FrameType.ANSWER, 0, id, encodeAnswer({ status: 404, code: '', reason: 'no descriptions here' })));
        socket.write(controlFrame(FrameType.PING, 0, 0, PING));
      } else if (open.kind === StreamKind.CONNECT) options.onConnect?.(id, open);
    }
  });
  if (options.read === false) socket.pause();
  else socket.on('data', (chunk: Buffer) => reader.push(chunk));
  return {
    socket,
    goAways,
    admitted,
    closed,
    send: (frame) => socket.write(frame),
    credit: (id) => Math.min(connectionCredit, streamCredit.get(id) ?? STREAM_WINDOW),
    spend: (id, bytes) => {
      connectionCredit -= bytes;
      streamCredit.set(id, (streamCredit.get(id) ?? STREAM_WINDOW) - bytes);
    },
  };
}
