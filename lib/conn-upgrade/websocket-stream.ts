import { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import { ErrorCodes, GateError } from '../errors.js';

/**
 * Largest message either side sends: longer writes go out as several messages. Two TLS records'
 * worth (a record is at most ~16 KiB), so a bulk transfer costs few messages; fixed, so every
 * receiver knows what it must accept.
 */
export const SEND_MESSAGE_BYTES = 32 * 1024;
/**
 * How long a closing WebSocket may wait for its peer's close frame and FIN before its socket is
 * destroyed (ws's `closeTimeout`, 30 s by default). Balancers may hold a half-closed connection
 * open until their own timeouts, and a closing stream must not keep an agent from exiting or a
 * slot taken for that long.
 */
export const CLOSE_TIMEOUT_MS = 2000;
/** Largest message accepted by default (a receiver may not go below SEND_MESSAGE_BYTES). */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024;

/** Running totals several streams add to (a ConnectionUpgrade's counts, for /metrics). */
export interface CarriedTally {
  /** Bytes received in binary messages (from the client, on the proxy). */
  bytesIn: number;
  /** Bytes sent in binary messages. */
  bytesOut: number;
  /** WebSocket pings sent (alpn-ping). */
  pingsSent: number;
}

export interface WebSocketStreamOptions {
  /**
   * Sends a WebSocket ping this often, so a load balancer's idle timeout never cuts a quiet
   * stream (0: never, the default). A ping still unanswered at the next one fails the stream with
   * GATE_ERR_CONN_UPGRADE_PING_TIMEOUT: a balancer may keep our side open after the client is
   * gone (HAProxy does, while our pings keep the tunnel busy), and nothing else would tell.
   */
  pingIntervalMs?: number;
  /** Added to as bytes and pings go, besides the stream's own bytesRead / bytesWritten. */
  tally?: CarriedTally;
}

/**
 * The byte stream carried by a WebSocket's binary messages (the TLS-routing connection upgrade),
 * as a Duplex: whatever is written goes out as binary messages, and every binary message
 * received is read in order. It keeps `bytesRead` / `bytesWritten` and an idle timer like
 * net.Socket's `setTimeout`, so the multiplexer treats it as it treats a socket.
 *
 * A WebSocket has no half-close: ending the writable side closes the WebSocket (1000), and the
 * readable side ends when the WebSocket closes. A text message is a protocol breach (the stream
 * is binary): the WebSocket is closed with 1003 and the stream fails with
 * GATE_ERR_CONN_UPGRADE_MESSAGE, as for a message over the size limit (1009) or malformed framing.
 * Backpressure holds both ways: a full read buffer pauses the WebSocket's socket, and a write
 * completes when the socket has taken it.
 */
export class WebSocketStream extends Duplex {
  bytesRead = 0;
  bytesWritten = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private readonly tally: CarriedTally | undefined;

  constructor(
    readonly ws: WebSocket,
    options: WebSocketStreamOptions = {},
  ) {
    super({ allowHalfOpen: false });
    this.tally = options.tally;
    ws.binaryType = 'nodebuffer';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) {
        ws.close(1003, 'binary messages only');
        this.destroy(new GateError(ErrorCodes.CONN_UPGRADE_MESSAGE, 'text message on the connection upgrade (binary only)'));
        return;
      }
      this.bytesRead += data.length;
      if (this.tally) this.tally.bytesIn += data.length;
      this.idleTimer?.refresh();
      if (!this.push(data)) ws.pause();
    });
    ws.once('close', () => {
      this.stopPings();
      this.push(null);
      // What is left unread must not keep the stream (and its connection) open for ever: a reader
      // that stopped (a stalled consumer above) has CLOSE_TIMEOUT_MS to take it.
      if (!this.readableEnded) {
        const late = setTimeout(() => this.destroy(), CLOSE_TIMEOUT_MS);
        this.once('close', () => clearTimeout(late));
      }
    });
    ws.on('error', (err: Error & { code?: string }) => {
      // ws names its framing errors WS_ERR_* (too large, bad opcode, unmasked frame, ...).
      const framing = typeof err.code === 'string' && err.code.startsWith('WS_ERR_');
      this.destroy(framing ? new GateError(ErrorCodes.CONN_UPGRADE_MESSAGE, `connection upgrade: ${err.message}`, { cause: err }) : err);
    });
    const pingMs = options.pingIntervalMs ?? 0;
    if (pingMs > 0) {
      let answered = true;
      const alive = (): boolean => (answered = true);
      ws.on('pong', alive);
      ws.on('message', alive); // data is as good an answer
      this.pingTimer = setInterval(() => {
        if (ws.readyState !== WebSocket.OPEN) return;
        // Not while we hold back reading (a slow consumer: the pong waits unread behind data) or
        // while our own sends queue (the ping waits behind them): only silence counts.
        if (!answered && !ws.isPaused && ws.bufferedAmount === 0) {
          this.destroy(
            new GateError(ErrorCodes.CONN_UPGRADE_PING_TIMEOUT, `no answer to a WebSocket ping within ${pingMs} ms: the client is gone`),
          );
          return;
        }
        answered = false;
        ws.ping();
        if (this.tally) this.tally.pingsSent++;
      }, pingMs);
    }
  }

  /** Like net.Socket's: `onTimeout` once nothing was read or written for `ms` (0 turns it off). */
  setTimeout(ms: number, onTimeout?: () => void): this {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (ms > 0) {
      this.idleTimer = setTimeout(() => {
        this.idleTimer = undefined;
        if (onTimeout) onTimeout();
        else this.emit('timeout');
      }, ms);
    }
    return this;
  }

  override _read(): void {
    this.ws.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.send([chunk], callback);
  }

  /**
   * Writes queued while one was on its way go out together: a TLS socket above writes record by
   * record (an HTTP/2 session above it, frame by frame), and one message per record would cost a
   * frame header, a send and a completion each.
   */
  override _writev(chunks: Array<{ chunk: Buffer }>, callback: (error?: Error | null) => void): void {
    this.send(
      chunks.map((c) => c.chunk),
      callback,
    );
  }

  private send(chunks: Buffer[], callback: (error?: Error | null) => void): void {
    const { ws } = this;
    // The peer closed: there is nobody to read this (a socket would fail with EPIPE); the
    // readable side ends with the close and takes the stream down cleanly.
    if (ws.readyState !== WebSocket.OPEN) return callback();
    const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    this.bytesWritten += data.length;
    if (this.tally) this.tally.bytesOut += data.length;
    this.idleTimer?.refresh();
    const max = SEND_MESSAGE_BYTES;
    for (let at = 0; at < data.length; at += max) {
      const last = at + max >= data.length;
      const part = at === 0 && last ? data : data.subarray(at, at + max);
      ws.send(part, { binary: true, compress: false }, last ? (err) => callback(err ?? null) : undefined);
    }
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.ws.close(1000);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.stopPings();
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    // Destroyed while open (a failure, a shutdown, the idle timeout): the socket goes at once, as
    // a destroyed net.Socket would. A close already under way (our end, or the peer's) finishes
    // its handshake, which ws bounds in time.
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
    callback(error);
  }

  private stopPings(): void {
    clearInterval(this.pingTimer);
    this.pingTimer = undefined;
  }
}
