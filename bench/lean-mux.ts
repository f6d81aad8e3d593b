// A lean stream multiplexer, for `bench:stream-floor` and `bench:tunnel-floor` only: what a tunnel
// stream would cost if the tunnel spoke a framing of its own instead of HTTP/2, so that a change of
// the tunnel's design can be argued from a figure measured beside Node's HTTP/2 in the same run.
// Not a protocol of gate-mux.
//
// It keeps what a tunnel must keep per stream: an open and its answer, DATA both ways, a FIN each
// way (half-close), and per-stream flow control (a credit the receiver returns as it consumes; a
// writer past its credit queues). Frames are HTTP/2's 9-byte header (length u24, type, flags,
// stream id u32), so that reading frames costs what nghttp2's framing costs; there is no HPACK
// (the open carries the target as text) and no per-stream Duplex: a stream is a small
// EventEmitter ('response', 'data', 'end', 'drain', 'close'), as a relay between a socket's handle
// and the tunnel would need.
// Output is gathered and written once per turn of the event loop, as Node's HTTP/2 session does
// (here with one copy, Buffer.concat, which a real codec would save with a gathered write).
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';

const OPEN = 1;
const ANSWER = 2;
const DATA = 3;
const WINDOW = 4;
const END = 0x1;
const HEADER = 9;
/** Each stream's credit both ways: what HTTP/2's default initial window allows. */
const CREDIT = 65_535;

export class LeanStream extends EventEmitter {
  /** Bytes this side may still send before the other side returns credit. */
  private credit = CREDIT;
  /** Bytes received and not yet returned as credit. */
  private consumed = 0;
  private queued: Buffer[] | undefined = undefined;
  private endQueued = false;
  private sentEnd = false;
  private gotEnd = false;
  /** What arrived before anyone read the stream, and whether its FIN did too. */
  private early: Buffer[] | undefined = undefined;
  private earlyEnd = false;

  constructor(
    private readonly mux: LeanMux,
    readonly id: number,
  ) {
    super();
  }

  /** Sends what the credit allows; the rest waits for credit (false: the caller should wait too). */
  write(data: Buffer): boolean {
    if (this.queued) {
      this.queued.push(data);
      return false;
    }
    if (data.length <= this.credit) {
      this.credit -= data.length;
      this.mux.frame(DATA, 0, this.id, data);
      return true;
    }
    if (this.credit > 0) this.mux.frame(DATA, 0, this.id, data.subarray(0, this.credit));
    this.queued = [data.subarray(this.credit)];
    this.credit = 0;
    return false;
  }

  end(): void {
    if (this.queued) {
      this.endQueued = true;
      return;
    }
    this.sentEnd = true;
    this.mux.frame(DATA, END, this.id, undefined);
    this.closeIfDone();
  }

  /** A frame for this stream, from the mux. */
  receive(type: number, flags: number, payload: Buffer): void {
    if (type === WINDOW) {
      this.credit += payload.readUInt32BE(0);
      this.flushQueued();
      return;
    }
    if (type === ANSWER) {
      this.emit('response', payload[0] === 0 ? 200 : 502);
      return;
    }
    if (this.early || this.listenerCount('data') === 0) {
      // Not read yet (an agent reads nothing until it has dialled): held, within the credit.
      if (payload.length > 0) (this.early ??= []).push(payload);
      this.earlyEnd ||= (flags & END) !== 0;
      this.early ??= [];
      return;
    }
    this.deliver(payload, flags);
  }

  /** The first 'data' listener starts the flow: what arrived before it comes first. */
  // biome-ignore lint/suspicious/noExplicitAny: EventEmitter's own signature, which this overrides
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    super.on(event, listener);
    if (event === 'data' && this.early) queueMicrotask(() => this.deliverEarly());
    return this;
  }

  private deliverEarly(): void {
    const early = this.early;
    if (!early) return;
    this.early = undefined;
    for (const payload of early) this.deliver(payload, 0);
    if (this.earlyEnd) this.deliver(Buffer.alloc(0), END);
  }

  private deliver(payload: Buffer, flags: number): void {
    if (payload.length > 0) {
      this.emit('data', payload);
      // Consumed at once by the listener (the bench's sides never pause): credit goes back once
      // half the window is used, as nghttp2 does.
      this.consumed += payload.length;
      if (this.consumed >= CREDIT / 2) {
        const credit = Buffer.allocUnsafe(4);
        credit.writeUInt32BE(this.consumed, 0);
        this.consumed = 0;
        this.mux.frame(WINDOW, 0, this.id, credit);
      }
    }
    if (flags & END) {
      this.gotEnd = true;
      this.emit('end');
      this.closeIfDone();
    }
  }

  private flushQueued(): void {
    const queued = this.queued;
    if (!queued) return;
    this.queued = undefined;
    for (let i = 0; i < queued.length; i++) {
      if (!this.write(queued[i]!)) {
        this.queued!.push(...queued.slice(i + 1));
        return;
      }
    }
    if (this.endQueued) this.end();
    else this.emit('drain');
  }

  private closeIfDone(): void {
    if (!this.sentEnd || !this.gotEnd) return;
    this.mux.forget(this.id);
    this.emit('close');
  }
}

/**
 * One side of a multiplexed connection: the opener (odd stream ids, the proxy's side) or the
 * answerer (`onOpen` for each stream the other side opens, the agent's side).
 */
export class LeanMux {
  private readonly streams = new Map<number, LeanStream>();
  private nextId = 1;
  private pending: Buffer[] = [];
  private flushScheduled = false;
  private input: Buffer | undefined = undefined;

  constructor(
    private readonly socket: Duplex,
    private readonly onOpen?: (stream: LeanStream, target: string) => void,
  ) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
  }

  /** Opens a stream to `target`; DATA may follow at once, before the answer. */
  open(target: string): LeanStream {
    const stream = new LeanStream(this, this.nextId);
    this.nextId += 2;
    this.streams.set(stream.id, stream);
    this.frame(OPEN, 0, stream.id, Buffer.from(target, 'latin1'));
    return stream;
  }

  /** Answers an opened stream: 200 (dialled) or a failure. */
  answer(stream: LeanStream, ok: boolean): void {
    this.frame(ANSWER, 0, stream.id, Buffer.of(ok ? 0 : 1));
  }

  frame(type: number, flags: number, id: number, payload: Buffer | undefined): void {
    const length = payload?.length ?? 0;
    const header = Buffer.allocUnsafe(HEADER);
    header.writeUIntBE(length, 0, 3);
    header[3] = type;
    header[4] = flags;
    header.writeUInt32BE(id, 5);
    this.pending.push(header);
    if (payload) this.pending.push(payload);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  forget(id: number): void {
    this.streams.delete(id);
  }

  private flush(): void {
    this.flushScheduled = false;
    const out = this.pending;
    this.pending = [];
    this.socket.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  }

  private read(chunk: Buffer): void {
    const data = this.input ? Buffer.concat([this.input, chunk]) : chunk;
    let at = 0;
    while (data.length - at >= HEADER) {
      const length = data.readUIntBE(at, 3);
      if (data.length - at < HEADER + length) break;
      const type = data[at + 3]!;
      const flags = data[at + 4]!;
      const id = data.readUInt32BE(at + 5);
      const payload = data.subarray(at + HEADER, at + HEADER + length);
      at += HEADER + length;
      if (type === OPEN) {
        const stream = new LeanStream(this, id);
        this.streams.set(id, stream);
        this.onOpen?.(stream, payload.toString('latin1'));
        continue;
      }
      this.streams.get(id)?.receive(type, flags, payload);
    }
    this.input = at < data.length ? data.subarray(at) : undefined;
  }
}
