import { lookup } from 'node:dns';
import { isIP, connect as netConnect, type OnReadOpts, type Socket } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import { dialDeadline } from '../transport/dial-deadline.js';
import { resolveDialOrder } from '../transport/address-order.js';
import { TcpDial } from '../transport/tcp-dial.js';
import { closeHandle, errnoError, type TcpHandle } from '../transport/uv.js';
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

function directTimeout(host: string, port: number, timeoutMs: number): GateError {
  return new GateError(ErrorCodes.DIAL_TIMEOUT, `dial ${formatHostPort(host, port)} (direct) timed out after ${timeoutMs} ms`);
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
  const timer = setTimeout(() => settle(directTimeout(host, port, options.timeoutMs)), options.timeoutMs);
  socket.once('connect', onConnect);
  socket.once('error', onError);
  return () => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    socket.destroy();
  };
}

/**
 * connectDirect on a bare libuv handle (transport/uv.ts), for a relay that needs no net.Socket
 * (transport/stream-relay.ts): the name resolved with dns.lookup, its addresses tried as
 * `forward` on handles tries them (TcpDial), one deadline. The same `done` contract, codes and
 * messages as connectDirect; the returned function cancels (nothing is called after it).
 * Only where `handlesAvailable` (uv.ts).
 */
export function connectDirectHandle(
  host: string,
  port: number,
  timeoutMs: number,
  done: (outcome: TcpHandle | GateError) => void,
): () => void {
  let settled = false;
  const settle = (outcome: TcpHandle | GateError): void => {
    if (settled) {
      if (!(outcome instanceof GateError)) closeHandle(outcome);
      return;
    }
    settled = true;
    cancelDeadline();
    tcp.cancel();
    done(outcome);
  };
  const tcp = new TcpDial(port, (outcome) =>
    settle(typeof outcome === 'string' ? directConnectError(errnoError(outcome), host, port) : outcome),
  );
  const cancelDeadline = dialDeadline(timeoutMs, () => settle(directTimeout(host, port, timeoutMs)));
  const family = isIP(host);
  if (family !== 0) tcp.connect([{ address: host, family: family === 6 ? 6 : 4 }]);
  else
    resolveDialOrder(host, lookup, (err, addresses) => {
      if (settled) return;
      if (err) return settle(directConnectError(err, host, port));
      if (addresses.length === 0) return settle(directConnectError(errnoError('ENOTFOUND'), host, port));
      tcp.connect(addresses);
    });
  return () => {
    if (settled) return;
    settled = true;
    cancelDeadline();
    tcp.cancel();
  };
}
