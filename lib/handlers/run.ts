import type { Duplex } from 'node:stream';
import { Server as HttpServer } from 'node:http';
import { Server as TlsServer } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import type { Handler } from '../mux/types.js';
import type { HandlerContext } from './context.js';
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
      // peeked bytes are still in the socket's buffer. TLS and HTTP/2 servers read them from there
      // themselves (TLSSocket and Http2Session drain `readableLength` on start); node:http only
      // listens for 'data', so it needs the paused socket resumed, after it has attached.
      handler.server.emit('connection', socket);
      if (handler.server instanceof HttpServer && !(handler.server instanceof TlsServer)) socket.resume();
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
        ctx.fail(new GateError(ErrorCodes.HANDLER_FAILED, `custom handler failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err }));
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
