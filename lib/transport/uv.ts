import { Socket, type Server } from 'node:net';
import { getSystemErrorName } from 'node:util';
import { isSharedReadBuffer, nextReadBuffer, sharedReadBuffer } from './read-buffer.js';
import type { Endpoint } from './endpoint.js';

/**
 * Node's libuv TCP handles: the objects under every net.Socket. Passthrough connections are
 * relayed on them directly. In the bench's connection-rate workload a routed connection cost the
 * router ~560 µs of CPU through net.Socket (streams, events, a Buffer per read) and ~300 µs on
 * the bare handles; nginx spends ~220 (BENCHMARKS.md). Node exposes the handles through
 * `process.binding('tcp_wrap' | 'stream_wrap')`, kept for compatibility (DEP0111 is
 * documentation-only for these two). `probe()` checks every member used here; if any is missing
 * (a future Node), `uvTcp` is undefined and the multiplexer stays on net.Socket.
 */
export interface TcpHandle {
  onread: (this: TcpHandle, data: ArrayBuffer | undefined) => Buffer | undefined;
  readStart(): number;
  useUserBuffer(buffer: Uint8Array): void;
  readStop(): number;
  writeBuffer(req: object, data: Uint8Array): number;
  writev(req: object, chunks: Uint8Array[], allBuffers: true): number;
  shutdown(req: object): number;
  close(callback?: () => void): void;
  setNoDelay(enable: boolean): number;
  getpeername(out: Partial<Endpoint>): number;
  getsockname(out: Partial<Endpoint>): number;
  connect(req: object, address: string, port: number): number;
  connect6(req: object, address: string, port: number): number;
  readonly bytesRead: number;
  readonly bytesWritten: number;
  readonly writeQueueSize: number;
  /** The socket descriptor (Unix): what the native relay duplicates. */
  readonly fd: number;
  /** Our back-pointer from the handle to whoever consumes its events. */
  [OWNER]?: HandleOwner;
  /** The buffer the next relay read lands in (startRelayReading). */
  [READ_BUFFER]?: Buffer;
}

/** Receives a handle's events: reads, write completions, shutdown and connect results. */
export interface HandleOwner {
  /**
   * `chunk` is a fresh view that the receiver may keep, except when `reused` (relay reads, see
   * startRelayReading): then it is a view of the handle's own read buffer, which its next read
   * overwrites.
   */
  onHandleData(handle: TcpHandle, chunk: Buffer, reused?: boolean): void;
  /** `error` undefined: the peer's FIN (EOF); else the errno name (ECONNRESET, ...). */
  onHandleEnd(handle: TcpHandle, error: string | undefined): void;
  /** An asynchronous write finished (`error` undefined) or failed. */
  onHandleWritten?(handle: TcpHandle, error: string | undefined): void;
  onHandleShutdown?(handle: TcpHandle, error: string | undefined): void;
  onHandleConnect?(handle: TcpHandle, error: string | undefined): void;
}

export const OWNER = Symbol('gate-mux.owner');
const READ_BUFFER = Symbol('gate-mux.read-buffer');
/** libuv's UV_EOF, the same value on every platform (uv-errno.h). */
const UV_EOF = -4095;

interface Bindings {
  TCP: new (type: number) => TcpHandle;
  TCPConnectWrap: new () => ConnectRequest;
  socketType: number;
  WriteWrap: new () => WriteRequest;
  ShutdownWrap: new () => ShutdownRequest;
  state: Int32Array;
  kReadBytesOrError: number;
  kArrayBufferOffset: number;
  kLastWriteWasAsync: number;
}

interface WriteRequest {
  handle: TcpHandle;
  /** Who wrote: the handle may have changed owner (detection → relay) before a queued write ends. */
  owner: HandleOwner | undefined;
  buffer: Buffer | Buffer[] | undefined;
  oncomplete: (this: WriteRequest, status: number) => void;
  async: boolean;
}
interface ShutdownRequest {
  handle: TcpHandle;
  oncomplete: (this: ShutdownRequest, status: number) => void;
}
interface ConnectRequest {
  handle: TcpHandle;
  address: string;
  port: number;
  oncomplete: (this: ConnectRequest, status: number, handle: TcpHandle) => void;
}

function probe(): Bindings | undefined {
  try {
    const binding = (process as unknown as { binding(name: string): Record<string, unknown> }).binding;
    const tcp = binding('tcp_wrap') as { TCP?: { prototype: object }; TCPConnectWrap?: unknown; constants?: { SOCKET?: number } };
    const stream = binding('stream_wrap') as Record<string, unknown>;
    const proto = tcp.TCP?.prototype as Record<string, unknown> | undefined;
    const methods = [
      'readStart',
      'readStop',
      'useUserBuffer',
      'writeBuffer',
      'writev',
      'shutdown',
      'close',
      'setNoDelay',
      'getpeername',
      'getsockname',
      'connect',
      'connect6',
    ];
    if (!proto || methods.some((m) => typeof proto[m] !== 'function')) return undefined;
    if (typeof tcp.TCPConnectWrap !== 'function' || typeof tcp.constants?.SOCKET !== 'number') return undefined;
    const state = stream.streamBaseState;
    const keys = [stream.kReadBytesOrError, stream.kArrayBufferOffset, stream.kLastWriteWasAsync];
    if (!(state instanceof Int32Array) || keys.some((k) => typeof k !== 'number')) return undefined;
    if (typeof stream.WriteWrap !== 'function' || typeof stream.ShutdownWrap !== 'function') return undefined;
    return {
      TCP: tcp.TCP as unknown as Bindings['TCP'],
      TCPConnectWrap: tcp.TCPConnectWrap as Bindings['TCPConnectWrap'],
      socketType: tcp.constants.SOCKET,
      WriteWrap: stream.WriteWrap as Bindings['WriteWrap'],
      ShutdownWrap: stream.ShutdownWrap as Bindings['ShutdownWrap'],
      state,
      kReadBytesOrError: keys[0] as number,
      kArrayBufferOffset: keys[1] as number,
      kLastWriteWasAsync: keys[2] as number,
    };
  } catch {
    return undefined;
  }
}

const uv = probe();

/** True when relays can run on libuv handles in this Node. */
export const handlesAvailable = uv !== undefined;

function errorName(status: number): string {
  try {
    return getSystemErrorName(status);
  } catch {
    return `errno ${status}`;
  }
}

/**
 * Takes over a listening server's accepted connections as bare handles, before net.Socket is
 * built for them (the server's own 'connection' event no longer fires). Works for cluster
 * workers too: both the shared and the round-robin handle deliver through `onconnection`.
 */
export function takeConnections(server: Server, onHandle: (handle: TcpHandle) => void): boolean {
  const listening = (server as unknown as { _handle?: { onconnection?: unknown } })._handle;
  if (!uv || !listening || typeof listening.onconnection !== 'function') return false;
  listening.onconnection = (status: number, handle: TcpHandle | undefined): void => {
    // A failed accept (EMFILE, ...) has no handle; net.Server would emit 'error' for it and
    // carry on, and so do we, without one.
    if (status === 0 && handle) onHandle(handle);
  };
  return true;
}

function endpointOf(handle: TcpHandle, which: 'getpeername' | 'getsockname'): Endpoint {
  const out: Partial<Endpoint> = {};
  handle[which](out);
  return { address: out.address ?? '', port: out.port ?? 0, family: out.family ?? '' };
}

export function remoteEndpoint(handle: TcpHandle): Endpoint {
  return endpointOf(handle, 'getpeername');
}

export function localEndpoint(handle: TcpHandle): Endpoint {
  return endpointOf(handle, 'getsockname');
}

// One read callback for every handle: no closure per connection.
function onread(this: TcpHandle, data: ArrayBuffer | undefined): undefined {
  const owner = this[OWNER];
  const b = uv!;
  const n = b.state[b.kReadBytesOrError]!;
  if (!owner) return;
  if (n > 0) owner.onHandleData(this, Buffer.from(data!, b.state[b.kArrayBufferOffset]!, n));
  else if (n < 0) owner.onHandleEnd(this, n === UV_EOF ? undefined : errorName(n));
}

/** Sends `handle`'s reads to `owner` from now on; false when the handle cannot read. */
export function startReading(handle: TcpHandle, owner: HandleOwner): boolean {
  handle[OWNER] = owner;
  handle.onread = onread;
  return handle.readStart() === 0;
}

/*
 * Relay reads land in the buffers of read-buffer.ts instead of a fresh 64 KiB allocation per
 * read: small reads in the one shared buffer, copied out; bulk in the handle's own buffer,
 * written on without a copy. (Bulk router CPU: 1.29 s/GB with a fresh buffer per read, 0.67
 * with these, nginx 0.79 in the same run; BENCHMARKS.md.)
 */
// Node's user-buffer reads (the net.connect `onread` mode underneath): the bytes are in the
// buffer given last, and a buffer returned from here is where the next read goes.
function onRelayRead(this: TcpHandle): Buffer | undefined {
  const owner = this[OWNER];
  const b = uv!;
  const n = b.state[b.kReadBytesOrError]!;
  if (!owner || n === 0) return undefined;
  if (n < 0) {
    owner.onHandleEnd(this, n === UV_EOF ? undefined : errorName(n));
    return undefined;
  }
  const buffer = this[READ_BUFFER]!;
  const shared = isSharedReadBuffer(buffer);
  const next = nextReadBuffer(buffer, n);
  if (next) this[READ_BUFFER] = next;
  owner.onHandleData(this, shared ? Buffer.from(buffer.subarray(0, n)) : buffer.subarray(0, n), !shared);
  return next;
}

/**
 * Like startReading, with reads into managed buffers (above). A chunk may be a view of the
 * handle's own buffer, which its next read overwrites: the owner must be done with it when
 * onHandleData returns, or stop reading until it is (a relay stops while its write is queued).
 */
export function startRelayReading(handle: TcpHandle, owner: HandleOwner): boolean {
  if (!handle[READ_BUFFER]) {
    handle[READ_BUFFER] = sharedReadBuffer();
    handle.useUserBuffer(handle[READ_BUFFER]);
  }
  handle[OWNER] = owner;
  handle.onread = onRelayRead;
  return handle.readStart() === 0;
}

export function stopReading(handle: TcpHandle): void {
  handle.readStop();
}

function onWritten(this: WriteRequest, status: number): void {
  const { owner } = this;
  this.buffer = undefined;
  this.owner = undefined;
  owner?.onHandleWritten?.(this.handle, status < 0 ? errorName(status) : undefined);
}

// Node binds a write request object to a native request only when libuv has to queue the write
// (StreamBase::Write tries the write first and returns before creating one when the kernel took
// it all). So one request object serves every write that completes at once, and a new one is
// made only after a write that kept it: most writes of a relay create no object at all.
let spareWrite: WriteRequest | undefined;

/**
 * Writes `data` (one buffer, or several in order). Returns 'done' when the kernel took all of it, 'queued' when the rest is
 * queued in libuv (the owner's onHandleWritten follows; `data` must not change until then), or
 * the errno name of a failure.
 */
export function write(handle: TcpHandle, data: Buffer | Buffer[]): 'done' | 'queued' | string {
  const b = uv!;
  const req = spareWrite ?? new b.WriteWrap();
  spareWrite = undefined;
  req.handle = handle;
  req.owner = handle[OWNER];
  req.oncomplete = onWritten;
  req.async = false;
  // The request holds the bytes: libuv keeps a pointer to them until the write completes.
  req.buffer = data;
  // Several buffers go out in one writev (no copy into one buffer first).
  const status = Array.isArray(data) ? handle.writev(req, data, true) : handle.writeBuffer(req, data);
  if (status < 0) return errorName(status);
  if (b.state[b.kLastWriteWasAsync] === 0) {
    req.buffer = undefined;
    req.owner = undefined;
    spareWrite = req;
    return 'done';
  }
  req.async = true;
  return 'queued';
}

function onShutdown(this: ShutdownRequest, status: number): void {
  this.handle[OWNER]?.onHandleShutdown?.(this.handle, status < 0 ? errorName(status) : undefined);
}

/**
 * Sends FIN once the queued writes are out. Returns true when onHandleShutdown will follow,
 * false when the shutdown finished (or was moot: ENOTCONN) at once.
 */
export function shutdown(handle: TcpHandle): boolean {
  const req = new uv!.ShutdownWrap();
  req.handle = handle;
  req.oncomplete = onShutdown;
  const status = handle.shutdown(req);
  return status === 0;
}

function onConnect(this: ConnectRequest, status: number): void {
  this.handle[OWNER]?.onHandleConnect?.(this.handle, status < 0 ? errorName(status) : undefined);
}

/**
 * Starts a TCP connection to an IP address; `owner.onHandleConnect` reports the result. Returns
 * the handle, or the errno name when the attempt could not even start.
 */
export function connectTcp(address: string, port: number, family: 4 | 6, owner: HandleOwner): TcpHandle | string {
  const b = uv!;
  const handle = new b.TCP(b.socketType);
  handle[OWNER] = owner;
  const req = new b.TCPConnectWrap();
  req.handle = handle;
  req.address = address;
  req.port = port;
  req.oncomplete = onConnect;
  const status = family === 6 ? handle.connect6(req, address, port) : handle.connect(req, address, port);
  if (status < 0) {
    handle.close();
    return errorName(status);
  }
  return handle;
}

export function closeHandle(handle: TcpHandle): void {
  // Any read still in flight finds no owner and is dropped (onread must stay a function: Node
  // asserts on anything else).
  handle[OWNER] = undefined;
  handle.close();
}

/**
 * Gives a handle to a net.Socket for handlers that want a stream: paused, with nothing read
 * yet (reads start when the handler starts consuming), exactly like a socket net.Server hands
 * out with `pauseOnConnect`.
 */
export function socketFromHandle(handle: TcpHandle): Socket {
  handle.readStop();
  handle[OWNER] = undefined;
  return new Socket({ handle, allowHalfOpen: true, readable: true, writable: true, pauseOnCreate: true } as ConstructorParameters<
    typeof Socket
  >[0]);
}

/**
 * A libuv error name (`ECONNRESET`) as the error net.Socket would have emitted, so the code that
 * classifies failures (dial errors, resets) reads both transports the same way.
 */
export function errnoError(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(code), { code });
}
