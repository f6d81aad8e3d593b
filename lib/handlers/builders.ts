import { ErrorCodes, GateError } from '../errors.js';
import type {
  CustomHandler,
  ForwardHandler,
  Handler,
  SelectHandler,
  WrapHandler,
  ServeHandler,
  TerminateHandler,
  UpstreamAddress,
} from './types.js';

/** Raw TCP passthrough to `to` ("host:port", an address object, or a per-connection chooser). */
export function forward(
  to: string | UpstreamAddress | ForwardHandler['to'],
  options: Omit<ForwardHandler, 'kind' | 'to'> = {},
): ForwardHandler {
  return { kind: 'forward', to: typeof to === 'string' ? parseHostPort(to) : to, ...options };
}

/** Terminates TLS with `tls` settings and hands the cleartext stream to `inner`. */
export function terminate(tls: TerminateHandler['tls'], inner: Handler): TerminateHandler {
  return { kind: 'terminate', tls, inner };
}

/** Hands the connection to an http, https, http2 or tls server through its 'connection' event. */
export function serve(server: ServeHandler['server']): ServeHandler {
  return { kind: 'serve', server };
}

/** User code receives the socket (peeked bytes unread) and the connection info. */
export function custom(handle: CustomHandler['handle']): CustomHandler {
  return { kind: 'custom', handle };
}

/** Chooses the handler per connection from its info. */
export function select(choose: SelectHandler['choose']): SelectHandler {
  return { kind: 'select', choose };
}

/** Runs `inner` on the stream `wrap` returns (e.g. a ping-framed view of the TLS stream). */
export function wrap(wrapper: WrapHandler['wrap'], inner: Handler): WrapHandler {
  return { kind: 'wrap', wrap: wrapper, inner };
}

/** Parses `host:port` or `[v6]:port`. */
export function parseHostPort(value: string): UpstreamAddress {
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(value) ?? /^([^:\s]+):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port > 0 && port < 65536))
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, `expected host:port or [v6]:port, got '${value}'`);
  return { host: m[1]!, port };
}
