import { connect as netConnect, type OnReadOpts, type Socket } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import { formatHostPort } from './target.js';

export interface ConnectDirectOptions {
  /** Deadline for the TCP connect (name resolution included). */
  timeoutMs: number;
  /** Keep the writable side open after the peer ends (for tunnels that half-close). */
  allowHalfOpen: boolean;
  /** Reads into caller-managed buffers (`net.connect`'s `onread`, see transport/read-buffer.ts). */
  onread?: OnReadOpts;
}

/** The GateError for a direct TCP connect to `host:port` that failed with `err`. */
export function directConnectError(err: unknown, host: string, port: number): GateError {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
  const authority = formatHostPort(host, port);
  if (code === 'ECONNREFUSED')
    return new GateError(ErrorCodes.DIAL_REFUSED, `dial ${authority} (direct): connection refused`, { cause: err });
  return new GateError(ErrorCodes.DIAL_FAILED, `dial ${authority} (direct) failed: ${(err as Error).message}`, { cause: err });
}

/**
 * A TCP connection to `host:port` with no proxy, no promise and one timer: what the agent does
 * for every stream it serves, where `dial()`'s generality (proxy resolution from the environment,
 * a deadline tracker over several sockets, a logger, two promises and an AbortSignal) was a
 * large share of the agent's work per connection. `done` runs once: with the connected socket,
 * or with GATE_ERR_DIAL_REFUSED / GATE_ERR_DIAL_FAILED / GATE_ERR_DIAL_TIMEOUT (the same codes
 * and messages as `dial()`). The returned function cancels a connect still under way (the
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
  const onError = (err: Error): void => settle(directConnectError(err, host, port));
  const timer = setTimeout(
    () =>
      settle(new GateError(ErrorCodes.DIAL_TIMEOUT, `dial ${formatHostPort(host, port)} (direct) timed out after ${options.timeoutMs} ms`)),
    options.timeoutMs,
  );
  socket.once('connect', onConnect);
  socket.once('error', onError);
  return () => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    socket.destroy();
  };
}
