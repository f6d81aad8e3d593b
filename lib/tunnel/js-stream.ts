import { Duplex } from 'node:stream';
import type { Socket } from 'node:net';

/**
 * A plain JS Duplex in front of `socket`, for an HTTP/2 session, used only to refuse an agent or a
 * peer proxy (`refuse` in registry.ts and cluster/peer-server.ts): closing the session then
 * destroys the socket with the refusal (`destroyError`), so the listener records its code; a
 * session on the socket itself would destroy it without one. Accepted agents' and peers' sessions
 * take the TLS socket over natively.
 *
 * History: this wrapper once carried every tunnel byte, because a session given the
 * TLSSocket that `terminate` builds by hand never read. The cause was the socket's
 * `secureConnecting`, left true (only tls.Server clears it): http2 waited for a 'secureConnect'
 * that never came. `terminate` now clears it (handlers/terminate.ts). For a stream without a
 * StreamBase handle Node wraps it in its JSStreamSocket and moves bytes in JS. Backpressure holds
 * both ways: `push` returning false pauses the socket and `read` resumes it; `write` completes
 * when the socket has taken the bytes.
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
