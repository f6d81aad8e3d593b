import { OWNER, closeHandle, shutdown, startRelayReading, stopReading, write, type HandleOwner, type TcpHandle } from './uv.js';

/** Which side failed, with the errno name (ECONNRESET, EPIPE, ...). */
export interface RelayFailure {
  side: 'client' | 'upstream';
  code: string;
}

/**
 * One direction's state: bytes read from `src` are written to `dst`. `ended`: `src` sent its
 * FIN; `finSent`: that FIN was passed on to `dst`.
 */
interface Direction {
  src: TcpHandle;
  dst: TcpHandle;
  writing: boolean;
  ended: boolean;
  finSent: boolean;
}

/**
 * Relays bytes both ways between two libuv handles, the passthrough fast path. Each direction has
 * backpressure (a write libuv had to queue stops the source's reads until it completes) and ends
 * on its own (a FIN is passed on with shutdown(), half-close), like splice() on sockets. The
 * last FIN is passed on by closing, which sends it without a shutdown round trip: both peers
 * have already ended, so nothing is unread and nothing is lost. Any error closes both handles.
 * One object and no closures per connection: a relay is its handles' owner.
 */
export class HandleRelay implements HandleOwner {
  /** Reads so far; the idle sweep compares it between sweeps. */
  reads = 0;
  private clientBytesRead = 0;
  private clientBytesWritten = 0;
  private readonly up: Direction;
  private readonly down: Direction;
  private closed = false;

  constructor(
    readonly client: TcpHandle,
    readonly upstream: TcpHandle,
    private readonly onClose: (failure: RelayFailure | undefined) => void,
  ) {
    this.up = { src: client, dst: upstream, writing: false, ended: false, finSent: false };
    this.down = { src: upstream, dst: client, writing: false, ended: false, finSent: false };
    client[OWNER] = this;
    upstream[OWNER] = this;
  }

  /** The client handle's byte counts, detection included. */
  get bytesRead(): number {
    return this.closed ? this.clientBytesRead : this.client.bytesRead;
  }

  get bytesWritten(): number {
    return this.closed ? this.clientBytesWritten : this.client.bytesWritten;
  }

  /** Writes `first` (peeked bytes, a PROXY header) to the upstream, then relays both ways. */
  start(first: Buffer | undefined): void {
    if (first && first.length > 0) this.forward(this.up, first);
    if (this.closed) return;
    if (!this.up.writing && !startRelayReading(this.client, this)) return this.fail('client', 'EBADF');
    if (!startRelayReading(this.upstream, this)) this.fail('upstream', 'EBADF');
  }

  /** Closes both handles now (shutdown, idle timeout, a failure elsewhere). */
  destroy(): void {
    this.finish(undefined);
  }

  onHandleData(handle: TcpHandle, chunk: Buffer): void {
    this.reads++;
    this.forward(handle === this.client ? this.up : this.down, chunk);
  }

  onHandleEnd(handle: TcpHandle, error: string | undefined): void {
    const dir = handle === this.client ? this.up : this.down;
    if (error !== undefined) return this.fail(sideOf(this, handle), error);
    dir.ended = true;
    stopReading(handle);
    const back = dir === this.up ? this.down : this.up;
    if (back.ended && back.finSent && !dir.writing && dir.dst.writeQueueSize === 0) return this.finish(undefined);
    if (!dir.writing) this.sendFin(dir);
  }

  onHandleWritten(handle: TcpHandle, error: string | undefined): void {
    const dir = handle === this.upstream ? this.up : this.down;
    if (error !== undefined) return this.fail(sideOf(this, handle), error);
    dir.writing = false;
    if (this.closed) return;
    if (dir.ended) this.sendFin(dir);
    else if (!startRelayReading(dir.src, this)) this.fail(sideOf(this, dir.src), 'EBADF');
  }

  onHandleShutdown(handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined && error !== 'ENOTCONN') return this.fail(sideOf(this, handle), error);
    this.finSent(handle === this.upstream ? this.up : this.down);
  }

  private forward(dir: Direction, chunk: Buffer): void {
    const result = write(dir.dst, chunk);
    if (result === 'done') return;
    if (result === 'queued') {
      dir.writing = true;
      stopReading(dir.src);
      return;
    }
    this.fail(sideOf(this, dir.dst), result);
  }

  private sendFin(dir: Direction): void {
    if (!shutdown(dir.dst)) this.finSent(dir);
  }

  private finSent(dir: Direction): void {
    dir.finSent = true;
    if (this.up.finSent && this.down.finSent) this.finish(undefined);
  }

  private fail(side: RelayFailure['side'], code: string): void {
    this.finish({ side, code });
  }

  private finish(failure: RelayFailure | undefined): void {
    if (this.closed) return;
    this.closed = true;
    this.clientBytesRead = this.client.bytesRead;
    this.clientBytesWritten = this.client.bytesWritten;
    closeHandle(this.client);
    closeHandle(this.upstream);
    this.onClose(failure);
  }
}

function sideOf(relay: HandleRelay, handle: TcpHandle): RelayFailure['side'] {
  return handle === relay.client ? 'client' : 'upstream';
}
