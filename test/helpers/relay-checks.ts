// What the relay tests share: seeded payloads, a sender that has stalled, a connection that the
// other side has closed.
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
