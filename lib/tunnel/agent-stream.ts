import { constants, type Http2Stream, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { connectDirect } from '../client/connect-direct.js';
import { dialHandle } from '../transport/handle-dial.js';
import { formatHostPort, parseTarget } from '../client/target.js';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import { ReadBuffer } from '../transport/read-buffer.js';
import { splice } from '../transport/splice.js';
import { StreamRelay } from '../transport/stream-relay.js';
import { closeHandle, handlesAvailable, type TcpHandle } from '../transport/uv.js';
import { refusalHeaders } from './connect-request.js';
import { CLIENT_ADDR_HEADER } from '../wire/names.js';

export interface AgentStreamOptions {
  /** May this agent open `host:port`? Asked before any dial. */
  allow: (target: string) => boolean;
  /** Milliseconds for the TCP connect to the target. */
  dialTimeoutMs: number;
  log: Logger;
  /**
   * Told about each target connection (a net.Socket, or the relay of a bare handle) so the agent
   * can destroy them all on stop; what it returns is called when that target has closed.
   */
  track: (target: AgentTarget) => (() => void) | undefined;
  /** Relay on net.Socket even where bare handles are available (tests compare both). */
  sockets?: boolean;
}

/** A target connection as the agent holds it: destroying it closes the target and its stream. */
export interface AgentTarget {
  destroy(): void;
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
 * and relays the stream to the target; or answers a refusal carrying a GATE_ERR_* code. Either
 * side going away takes the other with it, so no target connection outlives its stream.
 */
export function serveAgentStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, options: AgentStreamOptions): void {
  const { log } = options;
  // Until the splice owns them, stream errors (a reset from the proxy) only need to be absorbed.
  stream.on('error', (err) => log.debug({ err }, 'tunnel stream error'));
  if (headers[':method'] !== 'CONNECT') {
    refuse(stream, ErrorCodes.TARGET_INVALID, `only CONNECT is served, not ${String(headers[':method'])}`);
    return;
  }
  const checked = checkTarget(String(headers[':authority'] ?? ''), options);
  if (checked instanceof GateError) return refuse(stream, checked.code, checked.message);
  const { host, port, target } = checked;
  const allowed: AllowedStream = { stream, headers, host, port, target };
  if (handlesAvailable && !options.sockets) serveOnHandle(allowed, options);
  else serveOnSocket(allowed, options);
}

/** A target a stream may open: parsed, and allowed by the agent's policy. */
export interface CheckedTarget {
  host: string;
  port: number;
  /** `host:port`, as the policy and the log see it. */
  target: string;
}

/**
 * The target a stream asks for (`host:port`), checked as every tunnel stream's is, HTTP/2 or
 * framed: its syntax (GATE_ERR_TARGET_INVALID), then the agent's policy
 * (GATE_ERR_AGENT_TARGET_DENIED, logged). Returns the refusal to send, or the target to dial.
 */
export function checkTarget(text: string, options: Pick<AgentStreamOptions, 'allow' | 'log'>): CheckedTarget | GateError {
  let host: string;
  let port: number;
  try {
    const parsed = parseTarget(text);
    if (parsed.scheme !== undefined) throw new GateError(ErrorCodes.TARGET_INVALID, 'a tunnel stream opens host:port, not a URL');
    ({ host, port } = parsed);
  } catch (err) {
    return new GateError(ErrorCodes.TARGET_INVALID, (err as Error).message);
  }
  const target = formatHostPort(host, port);
  if (!options.allow(target)) {
    options.log.warn({ target, code: ErrorCodes.AGENT_TARGET_DENIED }, 'refused a stream to a target outside the policy');
    return new GateError(ErrorCodes.AGENT_TARGET_DENIED, `this agent does not serve ${target}`);
  }
  return { host, port, target };
}

/** A stream whose CONNECT target the policy allows: to dial and relay. */
interface AllowedStream {
  stream: ServerHttp2Stream;
  headers: IncomingHttpHeaders;
  host: string;
  port: number;
  /** `host:port`, for the log. */
  target: string;
}

/** A dial that failed: logged and refused with its code (true), or a connection to relay (false). */
function dialFailed(stream: ServerHttp2Stream, outcome: GateError | object, target: string, log: Logger): outcome is GateError {
  if (!(outcome instanceof GateError)) return false;
  log.warn({ target, code: outcome.code, err: outcome }, 'could not reach the target');
  refuse(stream, outcome.code, outcome.message);
  return true;
}

// RFC 9113 §8.5: a reset or error on the TCP side is signalled with RST_STREAM CONNECT_ERROR.
// Destroyed without an error, the stream would be reset with NO_ERROR: the proxy could not tell
// a broken connection from a finished one.
function connectError(stream: Http2Stream): void {
  if (!stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_CONNECT_ERROR);
}

/**
 * The target dialed as a bare handle and relayed to the stream by a StreamRelay: no net.Socket,
 * no stream machinery on the TCP side (as `forward` relays its connections). A stream that
 * closes while the target is being dialed cancels the dial.
 */
function serveOnHandle({ stream, headers, host, port, target }: AllowedStream, options: AgentStreamOptions): void {
  const { log } = options;
  const cancel = dialHandle(host, port, { timeoutMs: options.dialTimeoutMs }, (outcome: TcpHandle | GateError) => {
    stream.removeListener('close', cancel);
    if (dialFailed(stream, outcome, target, log)) return;
    const handle = outcome as TcpHandle;
    if (stream.destroyed || stream.closed) return closeHandle(handle);
    handle.setNoDelay(true);
    log.debug({ target, client: clientOf(headers) }, 'stream opened');
    stream.respond({ ':status': 200 });
    let untrack: (() => void) | undefined;
    const relay = new StreamRelay(handle, stream, {
      release: connectError,
      onClose: (failure) => {
        if (untrack) untrack();
        if (failure) log.debug({ target, failure }, 'tunnel stream ended with an error');
      },
    });
    untrack = options.track(relay);
    relay.start();
  });
  stream.once('close', cancel);
}

/**
 * The same on net.Socket, where bare handles are not available. The target's reads land in
 * buffers managed by ReadBuffer, written to the stream in place (no 64 KiB Buffer allocated per
 * read). A stream that closes while the target is being dialled cancels the dial.
 */
function serveOnSocket({ stream, headers, host, port, target }: AllowedStream, options: AgentStreamOptions): void {
  const { log } = options;
  const reader = new ReadBuffer();
  const cancel = connectDirect(host, port, { timeoutMs: options.dialTimeoutMs, allowHalfOpen: true, onread: reader.onread }, (outcome) => {
    stream.removeListener('close', cancel);
    if (dialFailed(stream, outcome, target, log)) return;
    const socket = outcome as Socket;
    if (stream.destroyed || stream.closed) {
      socket.destroy();
      return;
    }
    socket.setNoDelay(true);
    const untrack = options.track(socket);
    if (untrack) socket.once('close', untrack);
    // Who the proxy dials for: the client's real address, as the proxy it reached had it.
    log.debug({ target, client: clientOf(headers) }, 'stream opened');
    stream.respond({ ':status': 200 });
    let socketError = false;
    socket.once('error', () => (socketError = true));
    socket.once('close', () => {
      if (socketError || !socket.readableEnded || !socket.writableFinished) connectError(stream);
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
