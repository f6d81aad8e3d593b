import { connect as netConnect, type OnReadOpts, type Socket } from 'node:net';
import type { GateError } from '../errors.js';
import { dialFailure, dialTimeout } from '../transport/handle-dial.js';

export interface ConnectDirectOptions {
  /** Deadline for the TCP connect (name resolution included). */
  timeoutMs: number;
  /** Keep the writable side open after the peer ends (for tunnels that half-close). */
  allowHalfOpen: boolean;
  /** Reads into caller-managed buffers (`net.connect`'s `onread`, see transport/read-buffer.ts). */
  onread?: OnReadOpts;
}

/**
 * A TCP connection to `host:port` with no proxy, no promise and one timer: what the agent does
 * for every stream it serves, where `dial()`'s generality (proxy resolution from the environment,
 * a deadline tracker over several sockets, a logger, two promises and an AbortSignal) was a
 * large share of the agent's work per connection. `done` runs once: with the connected socket,
 * or with GATE_ERR_DIAL_REFUSED / GATE_ERR_DIAL_FAILED / GATE_ERR_DIAL_TIMEOUT in the words of
 * every dial (transport/handle-dial.ts; its `dialHandle` is this on a bare handle). The returned function cancels a connect still under way (the
 * socket is destroyed, `done` is not called); after `done` it does nothing.
 */
export function connectDirect(
  host: string,
  port: number,
  options: ConnectDirectOptions,
  done: (outcome: Socket | GateError) => void,
): () => void {
  let settled = false;
  const socket = netConnect({ host, port, allowHalfOpen: options.allowHalfOpen, ...(options.onread ? { onread: options.onread } : {}) });
  const settle = (err: GateError | undefined): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    socket.removeListener('connect', onConnect);
    socket.removeListener('error', onError);
    if (err) socket.destroy();
    done(err ?? socket);
  };
  const onConnect = (): void => settle(undefined);
  const onError = (err: Error): void => settle(dialFailure(err, host, port));
  const timer = setTimeout(() => settle(dialTimeout(host, port, options.timeoutMs)), options.timeoutMs);
  socket.once('connect', onConnect);
  socket.once('error', onError);
  return () => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    socket.destroy();
  };
}
