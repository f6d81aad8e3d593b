import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Endpoint } from './endpoint.js';
import {
  closeHandle,
  localEndpoint,
  remoteEndpoint,
  socketFromHandle,
  startReading,
  stopReading,
  write,
  type HandleOwner,
  type TcpHandle,
} from './uv.js';

/** What detection does with the client's bytes. */
export interface ClientReader {
  data(chunk: Buffer): void;
  /** The client's FIN. */
  end(): void;
}

/**
 * The accepted client while its first bytes are read and routed: a net.Socket, or a bare libuv
 * handle on the fast path (uv.ts) until a handler asks for a stream.
 */
export interface ClientEnd {
  readonly remote: Endpoint;
  readonly local: Endpoint;
  readonly bytesRead: number;
  readonly bytesWritten: number;
  /** Delivers reads to `reader` until stopReading(); a reset or a close destroys the end. */
  read(reader: ClientReader): void;
  stopReading(): void;
  write(data: Buffer): void;
  /** Writes `data` (a TLS alert) and closes once it is out. */
  closeAfter(data: Buffer): void;
  destroy(): void;
  /** The client as a paused stream (a net.Socket but for a StreamEnd) whose first unread bytes are `rest`. */
  toSocket(rest: Buffer): Duplex;
}

/** A stream's own byte counts (net.Socket's, and the WebSocket stream's). */
export interface ByteCounts {
  readonly bytesRead: number;
  readonly bytesWritten: number;
}

function endpoint(address: string | undefined, port: number | undefined, family: string | undefined): Endpoint {
  return { address: address ?? '', port: port ?? 0, family: family ?? '' };
}

/**
 * A client that is a stream: an accepted net.Socket (SocketEnd), or a byte stream carried inside
 * something else (a WebSocket connection upgrade) with the endpoints its carrier gives. Byte
 * counts are the stream's own `bytesRead` / `bytesWritten` when it keeps them (net.Socket does),
 * else zero.
 */
export class StreamEnd implements ClientEnd {
  private reader: ClientReader | undefined;
  private readonly onData = (chunk: Buffer): void => this.reader?.data(chunk);
  private readonly onEnd = (): void => this.reader?.end();

  constructor(
    readonly stream: Duplex & Partial<ByteCounts>,
    readonly remote: Endpoint,
    readonly local: Endpoint,
  ) {}

  get bytesRead(): number {
    return this.stream.bytesRead ?? 0;
  }

  get bytesWritten(): number {
    return this.stream.bytesWritten ?? 0;
  }

  read(reader: ClientReader): void {
    this.reader = reader;
    this.stream.on('data', this.onData);
    this.stream.once('end', this.onEnd);
  }

  stopReading(): void {
    this.reader = undefined;
    this.stream.removeListener('data', this.onData);
    this.stream.removeListener('end', this.onEnd);
  }

  write(data: Buffer): void {
    this.stream.write(data);
  }

  closeAfter(data: Buffer): void {
    const { stream } = this;
    if (stream.destroyed) return;
    stream.write(data);
    stream.end();
    // A stream that does not close after end (a half-open one) must not outlive its refusal.
    stream.once('finish', () => stream.destroy());
  }

  destroy(): void {
    this.stream.destroy();
  }

  toSocket(rest: Buffer): Duplex {
    const { stream } = this;
    // Stop the 'data' flow at once (the stream's flow loop would otherwise emit the bytes we are
    // about to unshift to no listener), then reset it to "no consumer yet", as on a fresh socket:
    // a handler's first on('data') or pipe() starts it, and until then bytes wait in the buffer.
    stream.pause();
    (stream as { readableFlowing: boolean | null }).readableFlowing = null;
    if (rest.length > 0) stream.unshift(rest);
    return stream;
  }
}

export class SocketEnd extends StreamEnd {
  constructor(readonly socket: Socket) {
    super(
      socket,
      endpoint(socket.remoteAddress, socket.remotePort, socket.remoteFamily),
      endpoint(socket.localAddress, socket.localPort, socket.remoteFamily),
    );
  }

  override closeAfter(data: Buffer): void {
    if (this.socket.destroyed) return;
    this.socket.write(data);
    this.socket.destroySoon();
  }

  override toSocket(rest: Buffer): Socket {
    super.toSocket(rest);
    return this.socket;
  }
}

/**
 * A client on a bare handle. It tells `onClosed` when it closes by itself or by destroy(), and
 * not when it is handed on (toSocket, take): its new owner reports from then on. A close caused
 * by a failed read or write passes the libuv error name (`ECONNRESET`), as net.Socket emits
 * 'error' before 'close': a client that resets during detection must be counted as such on
 * both transports.
 */
export class HandleEnd implements ClientEnd, HandleOwner {
  private reader: ClientReader | undefined;
  private closed = false;
  private handedOn = false;
  private closeWhenWritten = false;
  private finalRead = 0;
  private finalWritten = 0;
  private remoteCache: Endpoint | undefined;
  private localCache: Endpoint | undefined;

  constructor(
    private readonly handle: TcpHandle,
    private readonly onClosed: (error: string | undefined) => void,
  ) {}

  // The addresses cost a syscall each; most connections never ask for the local one.
  get remote(): Endpoint {
    this.remoteCache ??= remoteEndpoint(this.handle);
    return this.remoteCache;
  }

  get local(): Endpoint {
    this.localCache ??= localEndpoint(this.handle);
    return this.localCache;
  }

  get bytesRead(): number {
    return this.closed || this.handedOn ? this.finalRead : this.handle.bytesRead;
  }

  get bytesWritten(): number {
    return this.closed || this.handedOn ? this.finalWritten : this.handle.bytesWritten;
  }

  read(reader: ClientReader): void {
    this.reader = reader;
    if (!startReading(this.handle, this)) this.destroy();
  }

  stopReading(): void {
    this.reader = undefined;
    if (!this.closed && !this.handedOn) stopReading(this.handle);
  }

  onHandleData(_handle: TcpHandle, chunk: Buffer): void {
    this.reader?.data(chunk);
  }

  onHandleEnd(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined) return this.destroy(error);
    stopReading(this.handle);
    this.reader?.end();
  }

  onHandleWritten(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined || this.closeWhenWritten) this.destroy(error);
  }

  write(data: Buffer): void {
    if (this.closed || this.handedOn) return;
    const result = write(this.handle, data);
    if (result !== 'done' && result !== 'queued') this.destroy(result);
  }

  closeAfter(data: Buffer): void {
    if (this.closed || this.handedOn) return;
    this.stopReading();
    // close() would cancel a write libuv still holds; a finished one is the kernel's to send.
    if (write(this.handle, data) === 'queued') this.closeWhenWritten = true;
    else this.destroy();
  }

  /** Closes the handle; `error` is the libuv error name when a read or write failed. */
  destroy(error?: string): void {
    if (this.closed || this.handedOn) return;
    this.keepCounts();
    this.closed = true;
    closeHandle(this.handle);
    this.onClosed(error);
  }

  toSocket(rest: Buffer): Socket {
    this.keepCounts();
    this.handedOn = true;
    const socket = socketFromHandle(this.handle);
    (socket as { readableFlowing: boolean | null }).readableFlowing = null;
    if (rest.length > 0) socket.unshift(rest);
    return socket;
  }

  /** The handle, for a relay that owns it from now on. */
  take(): TcpHandle {
    this.stopReading();
    this.keepCounts();
    this.handedOn = true;
    return this.handle;
  }

  private keepCounts(): void {
    this.finalRead = this.handle.bytesRead;
    this.finalWritten = this.handle.bytesWritten;
  }
}
