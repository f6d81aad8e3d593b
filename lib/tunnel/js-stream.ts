import { Duplex } from 'node:stream';
import type { Socket } from 'node:net';

/**
 * A plain JS Duplex in front of `socket`, for `http2.connect({createConnection})`.
 *
 * Why: given a net.Socket, an Http2Session consumes its native StreamBase handle directly. On Node
 * 20.20 that fails for a server-side TLSSocket built by hand around an already-accepted socket
 * (`new TLSSocket(socket, {isServer: true})`, which is what `terminate` does after peeking the
 * ClientHello): the session never reads, and behind the multiplexer the process dies with SIGSEGV
 * (reproduced in isolation with a bare net server; TLSSockets from tls.createServer are fine).
 * For a stream without a StreamBase handle Node wraps it in its JSStreamSocket and moves bytes in
 * JS, which works everywhere. Backpressure holds both ways: `push` returning false pauses the
 * socket and `read` resumes it; `write` completes when the socket has taken the bytes.
 */
export function jsStreamOver(socket: Socket, options: { destroyError?: () => Error } = {}): Duplex {
  const duplex = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _encoding, callback) {
      socket.write(chunk, (err) => callback(err ?? null));
    },
    final(callback) {
      // Every write before this one has been taken by the socket (write completes on its
      // callback), so a refusal's GOAWAY is out before the socket is destroyed with the reason.
      const error = options.destroyError?.();
      if (error) socket.destroy(error);
      else socket.end();
      callback();
    },
    destroy(err, callback) {
      // `destroyError`: a socket ended on purpose (a refused agent) carries the reason to its owner.
      socket.destroy(err ?? options.destroyError?.());
      callback(err);
    },
  });
  socket.on('data', (chunk: Buffer) => {
    if (!duplex.push(chunk)) socket.pause();
  });
  socket.once('end', () => duplex.push(null));
  socket.once('error', (err) => duplex.destroy(err));
  socket.once('close', () => duplex.destroy());
  return duplex;
}
