// A framed session's streams: the ids each side takes, the streams open now, and the other side's
// streams as its concurrency limit counts them. Pure bookkeeping: framed-session.ts does the I/O.
import type { FramedStream } from './framed-stream.js';
import { FrameError, WireError } from './frames.js';

/** The highest stream id: ids are 31 bits (the header's top bit is reserved). */
export const MAX_STREAM_ID = 0x7fffffff;

/** The streams of one session, both ways. */
export class StreamTable {
  private readonly streams = new Map<number, FramedStream>();
  /** The id this side opens next; past MAX_STREAM_ID, it opens no more. */
  private nextId: number;
  /** The highest id the other side opened so far. */
  private lastPeer = 0;
  /**
   * Streams the other side opened that are still open on the wire: not reset or refused, and not
   * both FINs sent. What the concurrency limit counts.
   */
  private peerOpen = 0;
  /**
   * The other side's streams with one FIN crossed (1) or both (2, out of `peerOpen` already):
   * the limit counts a stream as HTTP/2 does (RFC 9113 §5.1: closed once both END_STREAMs have
   * passed), not until its last bytes are delivered here. The opener counts its streams until
   * they close on its side, which is never before that: so an opener that keeps under the limit
   * by its own count (the proxy, settings.ts) is never refused. Were a stream counted here until
   * delivered (a target that stopped reading), the two counts would part.
   */
  private readonly peerFins = new Map<FramedStream, number>();
  /**
   * Streams this side opened and still holds (until they close here): what it keeps under the
   * other side's limit. Never below the other side's count of them (see `peerFins`).
   */
  private ownOpen = 0;

  constructor(
    /** The dialer of the connection opens odd ids, the listener even ones. */
    private readonly side: 'dialer' | 'listener',
    firstId: number = side === 'dialer' ? 1 : 2,
  ) {
    if (firstId < 1 || firstId % 2 !== this.ownParity)
      throw new RangeError(`a ${side}'s stream ids are ${this.ownParity ? 'odd' : 'even'}`);
    this.nextId = firstId;
  }

  private get ownParity(): number {
    return this.side === 'dialer' ? 1 : 0;
  }

  /** Streams open now, both ways. */
  get size(): number {
    return this.streams.size;
  }

  /** The other side's streams its concurrency limit counts now. */
  get peerStreams(): number {
    return this.peerOpen;
  }

  /** This side's streams open now: what the other side's limit counts, or more. */
  get ownStreams(): number {
    return this.ownOpen;
  }

  /** The highest id the other side opened (GOAWAY's last stream id). */
  get lastPeerId(): number {
    return this.lastPeer;
  }

  /** False once this side has used its last id. */
  get idsLeft(): boolean {
    return this.nextId <= MAX_STREAM_ID;
  }

  /** This side's next id, taken; undefined when none is left. */
  takeId(): number | undefined {
    if (this.nextId > MAX_STREAM_ID) return undefined;
    const id = this.nextId;
    this.nextId += 2;
    return id;
  }

  /** An OPEN of the other side's: its id must be new and of its parity, or the framing is broken. */
  takePeerId(id: number): void {
    if (id === 0 || id % 2 === this.ownParity || id <= this.lastPeer)
      throw new FrameError(WireError.PROTOCOL_ERROR, `an OPEN of stream ${id}, not a new id of the other side`);
    this.lastPeer = id;
  }

  add(stream: FramedStream): void {
    this.streams.set(stream.id, stream);
    if (stream.opened) this.ownOpen++;
    else this.peerOpen++;
  }

  values(): FramedStream[] {
    return [...this.streams.values()];
  }

  /**
   * The stream a frame names, or undefined when it has closed. A frame naming a stream that was
   * never opened breaks the framing.
   */
  lookup(id: number, what: string): FramedStream | undefined {
    const stream = this.streams.get(id);
    if (stream) return stream;
    const ours = id % 2 === this.ownParity;
    if (id === 0 || (ours ? id >= this.nextId : id > this.lastPeer))
      throw new FrameError(WireError.PROTOCOL_ERROR, `${what} for stream ${id}, never opened`);
    return undefined;
  }

  /** The stream closed: it takes no more frames, and leaves the limit if it had not. True if it was here. */
  remove(stream: FramedStream): boolean {
    if (this.streams.get(stream.id) !== stream) return false;
    this.streams.delete(stream.id);
    if (stream.opened) this.ownOpen--;
    else {
      if (this.peerFins.get(stream) !== 2) this.peerOpen--;
      this.peerFins.delete(stream);
    }
    return true;
  }

  /** A FIN of the other side's stream crossed the wire, either way; at the second it leaves the limit. */
  peerFin(stream: FramedStream): void {
    const fins = (this.peerFins.get(stream) ?? 0) + 1;
    this.peerFins.set(stream, fins);
    if (fins === 2) this.peerOpen--;
  }
}
