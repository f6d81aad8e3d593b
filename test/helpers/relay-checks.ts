// What the relay tests share: seeded payloads, a sender that honours backpressure and one that has
// stalled, a digest of what arrives, a connection that the other side has closed.
import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { until } from './net.js';
import { prng } from './prng.js';

const MiB = 1 << 20;

/** `total` seeded pseudo-random bytes, produced in chunks of varying size, and their digest. */
export function payload(seed: number, total: number): { chunks: Buffer[]; sha: string } {
  const rng = prng(seed);
  const block = rng.bytes(MiB + 4096);
  const chunks: Buffer[] = [];
  const hash = createHash('sha256');
  for (let left = total; left > 0; ) {
    const n = Math.min(left, rng.range(1, 256 * 1024));
    const at = rng.int(block.length - n);
    const chunk = block.subarray(at, at + n);
    chunks.push(chunk);
    hash.update(chunk);
    left -= n;
  }
  return { chunks, sha: hash.digest('hex') };
}

/** Resolves once `progress.sent` has not moved for ten polls: the sender is held back (bounded). */
export async function stalled(progress: { readonly sent: number }): Promise<void> {
  let last = -1;
  let still = 0;
  await until(() => {
    still = progress.sent === last ? still + 1 : 0;
    last = progress.sent;
    return still >= 10;
  }, 'the sender to stall');
}

/** Resolves true once the other side closed `socket` (its FIN, a reset, or the close after them). */
export function gone(socket: Socket): Promise<boolean> {
  return new Promise((resolve) => {
    // A reset may have closed it already ('error' and 'close' emitted before anyone listened).
    if (socket.destroyed || socket.readableEnded) return resolve(true);
    for (const event of ['end', 'error', 'close']) socket.once(event, () => resolve(true));
    socket.resume();
  });
}

/** What `send` writes to: a socket, an HTTP/2 stream or a framed stream. */
export interface Sink {
  write(chunk: Buffer): boolean;
  end(): unknown;
  once(event: 'drain', listener: () => void): unknown;
}

/** How far `send` got: bytes written so far, and whether it has ended. */
export interface Progress {
  sent: number;
  done: boolean;
}

/** Writes `chunks` to `out` honouring backpressure (waits for 'drain'), then ends it. */
export function send(out: Sink, chunks: Buffer[]): Progress {
  const progress: Progress = { sent: 0, done: false };
  let i = 0;
  const pump = (): void => {
    while (i < chunks.length) {
      const chunk = chunks[i++]!;
      progress.sent += chunk.length;
      if (!out.write(chunk)) {
        out.once('drain', pump);
        return;
      }
    }
    progress.done = true;
    out.end();
  };
  pump();
  return progress;
}

/** What `digest` reads: a socket, an HTTP/2 stream or a framed stream (which starts paused). */
export interface Source {
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  once(event: 'end', listener: () => void): unknown;
  pause(): unknown;
  resume(): unknown;
}

/** The SHA-256 of what `input` delivers until its end; with `rng`, it pauses now and then. */
export function digest(input: Source, rng?: ReturnType<typeof prng>): Promise<string> {
  const hash = createHash('sha256');
  input.on('data', (chunk: Buffer) => {
    hash.update(chunk);
    if (rng?.chance(0.05)) {
      input.pause();
      setTimeout(() => input.resume(), rng.range(1, 5));
    }
  });
  const ended = new Promise<void>((resolve) => input.once('end', resolve));
  input.resume();
  return ended.then(() => hash.digest('hex'));
}
