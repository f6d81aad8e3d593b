// The PINGs a framed session sent and awaits: each carries a sequence number as its 8 bytes, and
// its echo (ACK) is matched back to it for the round trip. framed-session.ts sends and reads them.
import { ErrorCodes, GateError } from '../errors.js';

/** What a ping's callback gets: the round trip in milliseconds, or why there will be none. */
export type PingDone = (err: GateError | undefined, ms: number) => void;

/** PINGs outstanding, by the 8 bytes they carry. */
export class PingTable {
  private readonly pings = new Map<bigint, { at: bigint; done: PingDone }>();
  private seq = 0n;

  /** A new PING's payload; `done` is told when its echo comes (`answered`) or the session ends (`failAll`). */
  send(done: PingDone): Buffer {
    const seq = this.seq++;
    this.pings.set(seq, { at: process.hrtime.bigint(), done });
    const payload = Buffer.allocUnsafe(8);
    payload.writeBigUInt64BE(seq, 0);
    return payload;
  }

  /** A PING ACK: false when it echoes no PING of this side's (an idle frame). */
  answered(payload: Buffer): boolean {
    const seq = payload.readBigUInt64BE(0);
    const ping = this.pings.get(seq);
    if (!ping) return false;
    this.pings.delete(seq);
    ping.done(undefined, Number(process.hrtime.bigint() - ping.at) / 1e6);
    return true;
  }

  /** The session ended: every PING outstanding is told `error`. */
  failAll(error: GateError | undefined): void {
    for (const ping of this.pings.values())
      ping.done(error ?? new GateError(ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, 'the session closed before the PING was answered'), 0);
    this.pings.clear();
  }
}
