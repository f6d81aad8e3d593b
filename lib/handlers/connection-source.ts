/**
 * The client address of each connection handed to an in-process server (the `serve` handler):
 * the PROXY header's source when one came from a trusted network, else the socket's peer. A
 * server's request only sees the socket, whose peer is the load balancer behind PROXY protocol;
 * per-source limits must count the client. Weakly held: it goes with the socket.
 */
const sources = new WeakMap<object, string>();

export function rememberSource(socket: object, address: string): void {
  sources.set(socket, address);
}

/**
 * The remembered address of `socket`, or of the socket it wraps: a TLS server's socket keeps the
 * accepted one as `_parent` (http2's compat `req.socket` forwards the read to it).
 */
export function sourceOf(socket: { remoteAddress?: string | undefined } | undefined): string | undefined {
  let current = socket as (object & { _parent?: object; remoteAddress?: string }) | undefined;
  for (let depth = 0; current && depth < 4; depth++) {
    const known = sources.get(current);
    if (known !== undefined) return known;
    current = current._parent;
  }
  return socket?.remoteAddress;
}
