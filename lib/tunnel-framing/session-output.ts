// A framed session's output: the frames made during one turn of the event loop leave in one
// write, and the session counts what it owes the other side (control answers not written yet)
// and what waits in its socket. framed-session.ts makes the frames; this writes them.
import type { Duplex } from 'node:stream';
import { floodError } from './frames.js';

/** A turn's frames up to this size are joined into one buffer before they are written. */
const JOIN_LIMIT_BYTES = 16 * 1024;

/** In a gathered write, runs of pieces smaller than this are joined: tiny frames are not an object each. */
const SMALL_PIECE_BYTES = 1024;

/**
 * Control answers (PING ACKs, WINDOWs, the session's refusals) queued and not yet written: past
 * this count the session ends with ENHANCE_YOUR_CALM. nghttp2 bounds its outbound queue of such
 * frames the same way, in frames and not bytes (max_outbound_ack, NGHTTP2_DEFAULT_MAX_OBQ_FLOOD_ITEM:
 * 1000): each is an object however small, and a peer that never reads them would have them pile up.
 */
export const MAX_OWED_ANSWERS = 1000;

/**
 * Past this many unwritten answers the other side is not reading what it asked for: the session
 * stops reading its socket until they are written (their write calls back), so a flood stays in
 * the peer's own buffers and costs this side nothing. Answers, not bytes: this side's DATA backlog
 * never pauses reading, or two sides sending bulk to each other could each wait for the other.
 */
export const PAUSE_OWED_ANSWERS = 64;

/**
 * This side's own output waiting in the socket, past which its streams stop sending (they wait as
 * for credit) until the socket drains: a peer that grants credit and does not read would otherwise
 * have this side buffer every byte its clients send (CVE-2019-9517).
 */
export const OUTPUT_HIGH_BYTES = 4 << 20;

/** A turn's write, and what to do once it is out: its DATA's `written` callbacks, its answers' count. */
interface Flight {
  written: Array<() => void> | undefined;
  owed: number;
}

/** What the output tells its session. */
export interface OutputEvents {
  /** The socket took the output that was past OUTPUT_HIGH_BYTES: streams may send again. */
  drained(): void;
  /** A write completed: answers owed went down (the session may read again). */
  written(): void;
}

/** The frames of one session, gathered per turn and written; the answers it owes, counted. */
export class SessionOutput {
  /** Frames made this turn of the event loop, and their size: written together at its end. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** The `written` callbacks of this turn's DATA: they run when the turn's write completes. */
  private pendingWritten: Array<() => void> | undefined = undefined;
  /** Control answers among this turn's frames, and all not written yet (this turn's included). */
  private pendingOwed = 0;
  private owed = 0;
  /** Writes made and not called back yet, in order (a socket calls its writes back in order). */
  private readonly flights: Flight[] = [];
  private readonly onFlightWritten = (): void => this.flightWritten();
  /** Output (queued this turn, or in the socket) is past OUTPUT_HIGH_BYTES: streams wait for 'drain'. */
  private outputFull = false;
  private drainArmed = false;
  private readonly onOutputDrained = (): void => this.outputDrained();
  /** Set once the session is over: nothing more is queued. */
  private stopped = false;

  constructor(
    private readonly socket: Duplex,
    private readonly events: OutputEvents,
  ) {}

  /**
   * Ends the connection after `last` (a GOAWAY): what this turn queued, then `last`, then this
   * side's FIN; the other side has `graceMs` to close its end before the socket is destroyed.
   * Reading goes on meanwhile (`keepReading`; the session drops what it reads, DISCARD_LIMIT_BYTES):
   * a socket closed with unread bytes sends a TCP RST, which may discard the GOAWAY at the other
   * end before it is read. Not for a peer that reads none of its answers (reading paused): it will
   * not read the GOAWAY either. False when the socket is gone already.
   */
  endWith(last: Buffer, keepReading: boolean, graceMs: number): boolean {
    this.flush();
    const { socket } = this;
    if (socket.destroyed) return false;
    socket.write(last);
    socket.end();
    if (keepReading) socket.resume();
    const cutOff = setTimeout(() => socket.destroy(), graceMs);
    cutOff.unref();
    socket.once('close', () => clearTimeout(cutOff));
    return true;
  }

  /** True while this side's output is past OUTPUT_HIGH_BYTES: its streams wait for the socket. */
  get full(): boolean {
    return this.outputFull;
  }

  /** Control answers queued and not written yet. */
  get owedAnswers(): number {
    return this.owed;
  }

  /** A frame (or a DATA payload) to write at the end of this turn. */
  queue(bytes: Buffer): void {
    if (this.stopped) return;
    if (this.pending.length === 0) setImmediate(flushOutput, this);
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    // One turn may not queue more than the bound either (streams written in a loop).
    if (this.pendingBytes >= OUTPUT_HIGH_BYTES) this.outputFull = true;
  }

  /** `written` runs once this turn's write completes (or is dropped). */
  afterWrite(written: () => void): void {
    if (this.stopped) queueMicrotask(written);
    else (this.pendingWritten ??= []).push(written);
  }

  /** One more control answer queued, to be written. */
  owe(): void {
    this.pendingOwed++;
    this.owed++;
  }

  /**
   * The same, for an answer a frame of the other side asks for (a PING, an open refused): past
   * MAX_OWED_ANSWERS unwritten, it asks faster than it reads, and the session ends. (WINDOWs are
   * counted but not cut here: a stream's reader makes them, and the credit bounds how many.)
   */
  oweOrCut(): void {
    if (this.owed >= MAX_OWED_ANSWERS) throw floodError(`more than ${MAX_OWED_ANSWERS} answers owed and not read`);
    this.owe();
  }

  /** The session is over: what is queued later is dropped. */
  sessionEnded(): void {
    this.stopped = true;
  }

  /**
   * The turn's frames in one write. Small ones (a connection's opening, its answer, a turn of a
   * request and its response) are joined into one buffer: one copy of a few KiB costs less than
   * the Writable's list and a gathered write. Bulk goes as a gathered write, with no copy.
   */
  flush(): void {
    const { pending, pendingBytes, pendingWritten, pendingOwed, socket } = this;
    if (pending.length === 0) return;
    this.pending = [];
    this.pendingBytes = 0;
    this.pendingWritten = undefined;
    this.pendingOwed = 0;
    if (socket.destroyed) {
      // Dropped: told as a failed write would be, after this call (as afterWrite tells a late one).
      this.owed -= pendingOwed;
      if (pendingWritten) for (const written of pendingWritten) queueMicrotask(written);
      return;
    }
    // The socket calls back once the write is out (or failed): the payloads are no longer held,
    // the answers no longer owed.
    let done: (() => void) | undefined;
    if (pendingWritten !== undefined || pendingOwed > 0) {
      this.flights.push({ written: pendingWritten, owed: pendingOwed });
      done = this.onFlightWritten;
    }
    if (pending.length === 1) socket.write(pending[0]!, done);
    else if (pendingBytes <= JOIN_LIMIT_BYTES) socket.write(Buffer.concat(pending, pendingBytes), done);
    else writeGathered(socket, pending, done);
    if (socket.writableLength >= OUTPUT_HIGH_BYTES) this.outputFull = true;
    if (this.outputFull && !this.drainArmed) {
      // 'drain' comes: a write of this size went past the socket's high-water mark (false).
      this.drainArmed = true;
      socket.once('drain', this.onOutputDrained);
    }
  }

  private flightWritten(): void {
    const flight = this.flights.shift();
    if (!flight) return;
    this.owed -= flight.owed;
    if (flight.written) runAll(flight.written);
    this.events.written();
  }

  private outputDrained(): void {
    this.drainArmed = false;
    this.outputFull = false;
    this.events.drained();
  }
}

function flushOutput(output: SessionOutput): void {
  output.flush();
}

function runAll(callbacks: Array<() => void>): void {
  for (const callback of callbacks) callback();
}

/**
 * A large turn as a gathered write, with no copy of its bulk; runs of small pieces between (many
 * tiny frames) are joined, so the socket's queue holds a bounded number of objects per byte.
 */
function writeGathered(socket: Duplex, pending: Buffer[], done: (() => void) | undefined): void {
  socket.cork();
  const last = pending.length - 1;
  let runFrom = -1;
  let runBytes = 0;
  for (let i = 0; i <= last; i++) {
    const piece = pending[i]!;
    if (piece.length < SMALL_PIECE_BYTES && i < last) {
      if (runFrom < 0) runFrom = i;
      runBytes += piece.length;
      continue;
    }
    if (runFrom >= 0) {
      // A run of one small piece (a DATA header before its payload) is written as it is.
      socket.write(i - runFrom === 1 ? pending[runFrom]! : Buffer.concat(pending.slice(runFrom, i), runBytes));
      runFrom = -1;
      runBytes = 0;
    }
    socket.write(piece, i === last ? done : undefined);
  }
  socket.uncork();
}
