import { Duplex } from 'node:stream';
import { PING_FRAME, PingFrameDecoder, lengthPrefix } from './ping-frames.js';

/** Default keep-alive interval: well under the 60 s idle cut of common load balancers. */
export const DEFAULT_PING_INTERVAL_MS = 15_000;

/**
 * Wraps a framed stream: reads give the payloads, writes are framed, and an empty frame goes out
 * every `intervalMs`. Backpressure passes through in both directions.
 */
export class PingFramedStream extends Duplex {
  private readonly decoder = new PingFrameDecoder();
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly inner: Duplex,
    intervalMs = DEFAULT_PING_INTERVAL_MS,
  ) {
    super({ allowHalfOpen: true });
    inner.on('data', (chunk: Buffer) => {
      for (const payload of this.decoder.push(chunk)) if (!this.push(payload)) inner.pause();
    });
    inner.once('end', () => this.push(null));
    inner.once('error', (err) => this.destroy(err));
    inner.once('close', () => this.destroy());
    if (intervalMs > 0) {
      this.timer = setInterval(() => {
        if (inner.writable && inner.writableLength === 0) inner.write(PING_FRAME);
      }, intervalMs);
      this.timer.unref();
    }
  }

  override _read(): void {
    this.inner.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (chunk.length === 0) return callback();
    this.inner.write(lengthPrefix(chunk.length));
    this.inner.write(chunk, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    clearInterval(this.timer);
    this.inner.end(callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    clearInterval(this.timer);
    this.inner.destroy(error ?? undefined);
    callback(error);
  }
}
