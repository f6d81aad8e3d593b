import { connect, type Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError } from '../errors.js';
import { encodeProxyHeaderV1, encodeProxyHeaderV2 } from '../proxy-protocol/header.js';
import { splice } from '../transport/splice.js';
import { ReadBuffer } from '../transport/read-buffer.js';
import type { ConnectionInfo, ForwardHandler, UpstreamAddress } from './types.js';
import type { HandlerContext } from './context.js';
import { dialDeadline } from '../transport/dial-deadline.js';
import { dialFailure, dialTimeout } from '../transport/handle-dial.js';
import { refuseClient, refusalFor } from './refuse.js';

export const DEFAULT_DIAL_TIMEOUT_MS = 10_000;
/** Postgres SSLRequest: int32 length 8, int32 code 80877103 (PostgreSQL protocol §55.2.10). */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

/**
 * Raw passthrough to an upstream. The client socket is paused with its peeked bytes unshifted,
 * so they reach the upstream first, in order, once the pipe starts.
 */
export function runForward(client: Duplex, handler: ForwardHandler, ctx: HandlerContext): void {
  const to = upstreamOf(handler, ctx.info);
  // The upstream's reads land in buffers managed by ReadBuffer (no Buffer per read in bulk).
  const reader = new ReadBuffer();
  const upstream = connect({
    host: to.host,
    port: to.port,
    allowHalfOpen: true,
    noDelay: true,
    onread: reader.onread,
    ...(handler.lookup ? { lookup: handler.lookup } : {}),
  });
  const dialTimeoutMs = handler.dialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS;
  const failDial = (error: GateError): void => {
    const protocol = refusalFor(handler.refusal, client, ctx.info);
    if (!protocol) return ctx.fail(error);
    // The client is told why in its protocol; the connection still fails with the dial's code.
    ctx.recordError(error, 'upstream');
    upstream.destroy();
    refuseClient(client, error, protocol, undefined);
  };
  const cancelDeadline = dialDeadline(dialTimeoutMs, () => {
    failDial(dialTimeout(to.host, to.port, dialTimeoutMs));
  });
  const onDialError = (err: NodeJS.ErrnoException): void => {
    cancelDeadline();
    failDial(dialFailure(err, to.host, to.port));
  };
  // Before adopt(): listeners run in order, and the dial's own error (refused, unreachable) must
  // be the one recorded, not a generic reset.
  upstream.once('error', onDialError);
  ctx.adopt(upstream, 'upstream');
  upstream.once('close', () => cancelDeadline());
  upstream.once('connect', () => {
    cancelDeadline();
    upstream.removeListener('error', onDialError);
    // The PROXY header goes out on connect, before any client byte (caddy-l4 #212: servers that
    // speak first must learn the client address before they greet).
    if (handler.sendProxyHeader) upstream.write(proxyHeaderFor(handler.sendProxyHeader, ctx.info));
    const join = (): void =>
      splice(
        client,
        upstream,
        (err) => {
          if (err) ctx.fail(streamError(err, upstream.errored === err ? `upstream ${to.host}:${to.port}` : 'client'));
        },
        reader,
      );
    // Only raw TLS passing through needs the SSLRequest replayed; after `terminate` the upstream
    // gets the cleartext StartupMessage as a plain Postgres connection.
    if (ctx.info.postgresSslRequest && !(client instanceof TLSSocket)) replaySslRequest(upstream, reader, ctx, join);
    else join();
  });
}

function streamError(err: NodeJS.ErrnoException, side: string): GateError {
  if (err instanceof GateError) return err;
  const code = side === 'client' ? ErrorCodes.CLIENT_RESET : ErrorCodes.UPSTREAM_RESET;
  return new GateError(code, `${side} connection failed: ${err.code ?? err.message}`, { cause: err });
}

export function upstreamOf(handler: ForwardHandler, info: ConnectionInfo): UpstreamAddress {
  return typeof handler.to === 'function' ? handler.to(info) : handler.to;
}

export function proxyHeaderFor(version: 'v1' | 'v2', info: ConnectionInfo): Buffer {
  const { remote, local } = info;
  const family = (e: { family: string }): 'IPv4' | 'IPv6' => (e.family === 'IPv6' ? 'IPv6' : 'IPv4');
  const source = { address: remote.address, port: remote.port, family: family(remote) };
  const destination = { address: local.address, port: local.port, family: family(local) };
  return version === 'v1' ? encodeProxyHeaderV1(source, destination) : encodeProxyHeaderV2(source, destination);
}

/**
 * gate-mux answered the client's SSLRequest itself, so a TLS-passthrough upstream (a Postgres
 * server) has not seen it yet: send it and take its one-byte answer before splicing the TLS.
 */
function replaySslRequest(upstream: Socket, reader: ReadBuffer, ctx: HandlerContext, then: () => void): void {
  upstream.write(SSL_REQUEST);
  let answered = false;
  reader.attach((chunk: Buffer): boolean => {
    if (answered) return false; // held until the splice attaches its sink (not reached: it attaches at once)
    answered = true;
    if (chunk[0] !== 0x53 /* 'S' */) {
      ctx.fail(
        new GateError(ErrorCodes.HANDLER_FAILED, `upstream declined TLS after SSLRequest (answered 0x${(chunk[0] ?? 0).toString(16)})`),
      );
      return false;
    }
    if (chunk.length > 1) {
      // Bytes after 'S' before our TLS started would be injected into the session (CVE-2021-23222).
      ctx.fail(new GateError(ErrorCodes.HANDLER_FAILED, 'upstream sent unexpected bytes after its SSLRequest answer'));
      return false;
    }
    then();
    return true;
  });
}
