import type { Duplex } from 'node:stream';
import { Socket } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import type { Handler } from './types.js';
import type { HandlerContext } from './context.js';
import { rememberSource } from './connection-source.js';
import { runForward } from './forward.js';
import { runTerminate } from './terminate.js';

/** Runs a route's handler on a detected connection (and, for terminate, its inner handler). */
export function runHandler(socket: Duplex, handler: Handler, ctx: HandlerContext): void {
  switch (handler.kind) {
    case 'forward':
      runForward(socket, handler, ctx);
      return;
    case 'terminate':
      runTerminate(socket, handler, ctx, (tlsSocket) => runHandler(tlsSocket, handler.inner, ctx));
      return;
    case 'serve':
      // http, https, http2 and tls servers all take foreign sockets through 'connection'; the
      // peeked bytes are still in the socket's buffer, where TLSSocket and Http2Session drain
      // them on start and node:http's 'data' listener receives them first.
      // Servers own their connection's lifecycle and do not half-close: with allowHalfOpen left
      // on (the listener sets it for passthrough), a TLS server's socket never closes after the
      // client's FIN (seen with HTTP/2 sessions), so the connection would outlive its client.
      if (socket instanceof Socket) socket.allowHalfOpen = false;
      rememberSource(socket, ctx.info.remote.address);
      handler.server.emit('connection', socket);
      return;
    case 'wrap': {
      const wrapped = handler.wrap(socket, ctx.info);
      ctx.adopt(wrapped);
      runHandler(wrapped, handler.inner, ctx);
      return;
    }
    case 'select':
      runHandler(socket, handler.choose(ctx.info), ctx);
      return;
    case 'custom': {
      const fail = (err: unknown): void =>
        ctx.fail(
          new GateError(ErrorCodes.HANDLER_FAILED, `custom handler failed: ${err instanceof Error ? err.message : String(err)}`, {
            cause: err,
          }),
        );
      try {
        const result = handler.handle(socket as Parameters<typeof handler.handle>[0], ctx.info);
        if (result && typeof (result as Promise<void>).then === 'function') (result as Promise<void>).catch(fail);
      } catch (err) {
        fail(err);
      }
      return;
    }
  }
}
