import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { connectDirect } from '../client/connect-direct.js';
import { formatHostPort, parseTarget } from '../client/target.js';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import { ReadBuffer } from '../transport/read-buffer.js';
import { splice } from '../transport/splice.js';
import { refusalHeaders } from './connect-request.js';
import { CLIENT_ADDR_HEADER } from '../wire/names.js';

export interface AgentStreamOptions {
  /** May this agent open `host:port`? Asked before any dial. */
  allow: (target: string) => boolean;
  /** Milliseconds for the TCP connect to the target. */
  dialTimeoutMs: number;
  log: Logger;
  /** Told about each target socket so the agent can destroy them all on stop. */
  track: (socket: Socket) => void;
}

/** The client's address the proxy sent with the CONNECT, or undefined (an older proxy). */
export function clientOf(headers: IncomingHttpHeaders): string | undefined {
  const value = headers[CLIENT_ADDR_HEADER];
  return typeof value === 'string' ? value : undefined;
}

function refuse(stream: ServerHttp2Stream, code: string, message: string): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond(refusalHeaders(code, message), { endStream: true });
}

/**
 * Serves one stream the proxy opened: checks the CONNECT target against the agent's policy, dials
 * it directly (the resource lives in the agent's own network: no environment proxy), answers 200
 * and splices the stream to the socket; or answers a refusal carrying a GATE_ERR_* code. Either
 * side going away takes the other with it (splice), so no target socket outlives its stream.
 */
export function serveAgentStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, options: AgentStreamOptions): void {
  const { log } = options;
  // Until the splice owns them, stream errors (a reset from the proxy) only need to be absorbed.
  stream.on('error', (err) => log.debug({ err }, 'tunnel stream error'));
  if (headers[':method'] !== 'CONNECT') {
    refuse(stream, ErrorCodes.TARGET_INVALID, `only CONNECT is served, not ${String(headers[':method'])}`);
    return;
  }
  let host: string;
  let port: number;
  try {
    const parsed = parseTarget(String(headers[':authority'] ?? ''));
    if (parsed.scheme !== undefined) throw new GateError(ErrorCodes.TARGET_INVALID, 'CONNECT takes host:port');
    ({ host, port } = parsed);
  } catch (err) {
    refuse(stream, ErrorCodes.TARGET_INVALID, (err as Error).message);
    return;
  }
  const target = formatHostPort(host, port);
  if (!options.allow(target)) {
    log.warn({ target, code: ErrorCodes.AGENT_TARGET_DENIED }, 'refused a stream to a target outside the policy');
    refuse(stream, ErrorCodes.AGENT_TARGET_DENIED, `this agent does not serve ${target}`);
    return;
  }
  // The target's reads land in buffers managed by ReadBuffer, written to the stream in place (no
  // 64 KiB Buffer allocated per read), as `forward` does. A stream that closes while the target is
  // being dialled cancels the dial (the socket is destroyed, nothing is answered).
  const reader = new ReadBuffer();
  const cancel = connectDirect(host, port, { timeoutMs: options.dialTimeoutMs, allowHalfOpen: true, onread: reader.onread }, (socket) => {
    stream.removeListener('close', cancel);
    if (socket instanceof GateError) {
      log.warn({ target, code: socket.code, err: socket }, 'could not reach the target');
      refuse(stream, socket.code, socket.message);
      return;
    }
    if (stream.destroyed || stream.closed) {
      socket.destroy();
      return;
    }
    socket.setNoDelay(true);
    options.track(socket);
    // Who the proxy dials for: the client's real address, as the proxy it reached had it.
    log.debug({ target, client: clientOf(headers) }, 'stream opened');
    stream.respond({ ':status': 200 });
    // RFC 9113 §8.5: a reset or error on the TCP side is signalled with RST_STREAM CONNECT_ERROR.
    // Left to splice, the stream would be destroyed without an error, which Node sends as
    // RST_STREAM NO_ERROR: the proxy could not tell a broken connection from a finished one.
    let socketError = false;
    socket.once('error', () => (socketError = true));
    socket.once('close', () => {
      const clean = !socketError && socket.readableEnded && socket.writableFinished;
      if (!clean && !stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_CONNECT_ERROR);
    });
    // Stream to target coalesced (splice.ts relayCoalesced: the stream delivers many small
    // chunks per read); target to stream from the read buffer, in place.
    splice(
      stream,
      socket,
      (err) => {
        if (err) log.debug({ target, err }, 'tunnel stream ended with an error');
      },
      reader,
      { coalesceA: true, aReleasesAtCallback: true },
    );
  });
  stream.once('close', cancel);
}
