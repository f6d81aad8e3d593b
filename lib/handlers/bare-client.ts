import type { HandleEnd } from '../transport/client-end.js';
import type { ConnectionParts } from './context.js';
import type { Handler } from './types.js';

/** Puts a relay on bare handles under the multiplexer's idle sweep (when an idle timeout is set). */
export type WatchRelay = (relay: { readonly reads: number }, conn: ConnectionParts) => void;

/**
 * Takes a client still on its bare libuv handle (the multiplexer's fast path, transport/uv.ts)
 * with the bytes detection read (`rest`, to go first), instead of the net.Socket a custom handler
 * gets. It owns the connection's parts from then on as `forward` on handles does: attaches what
 * it starts, hands the client over to its relay, reports each part's close and failure.
 */
export type BareClientHook = (client: HandleEnd, rest: Buffer, conn: ConnectionParts, watch: WatchRelay | undefined) => void;

/**
 * Where a custom handler keeps its BareClientHook. Internal, and a symbol so that it is no part
 * of the CustomHandler contract: user handlers always get a Duplex; the built-in tunnel handler
 * (tunnel/via-tunnel.ts) carries one, so a passthrough client reaches its tunnel stream without
 * becoming a net.Socket. A client that is a stream already (TLS terminated here, a carried
 * connection) goes to `handle` as before.
 */
export const BARE_CLIENT = Symbol('gate-mux.bare-client');

export function bareClientHook(handler: Handler): BareClientHook | undefined {
  return handler.kind === 'custom' ? (handler as { [BARE_CLIENT]?: BareClientHook })[BARE_CLIENT] : undefined;
}
