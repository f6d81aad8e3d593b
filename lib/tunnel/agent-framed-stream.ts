// The agent's side of one stream of a framed tunnel (lib/tunnel-framing): what serveAgentStream
// (agent-stream.ts) does for an HTTP/2 CONNECT stream, for a framed one. Not yet reached from the
// agent's tunnels, which speak HTTP/2 only; bench:tunnel-floor measures it.
import type { Socket } from 'node:net';
import { connectDirect, connectDirectHandle } from '../client/connect-direct.js';
import { formatHostPort, parseTarget } from '../client/target.js';
import { ErrorCodes, GateError } from '../errors.js';
import { closeHandle, handlesAvailable, type TcpHandle } from '../transport/uv.js';
import { FramedRelay, resetConnectError } from '../tunnel-framing/framed-relay.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import { type OpenPayload, StreamKind, WireError } from '../tunnel-framing/frames.js';
import type { AgentStreamOptions } from './agent-stream.js';

/** The refusal status of each code, as HTTP/2's refusal headers would carry it. */
function statusOf(code: string): number {
  if (code === ErrorCodes.AGENT_TARGET_DENIED) return 403;
  if (code === ErrorCodes.TARGET_INVALID) return 400;
  return 502;
}

function refuse(stream: FramedStream, code: string, reason: string): void {
  stream.respond({ status: statusOf(code), code, reason });
}

/**
 * Serves one stream the proxy opened: checks its target against the agent's policy, dials it
 * directly (the resource lives in the agent's own network: no environment proxy), answers 200 and
 * relays the stream to the target; or refuses it with a GATE_ERR_* code and a reason. A stream
 * that closes while the target is dialled cancels the dial; either side going away takes the
 * other with it. What the proxy wrote before the answer (the client's first flight) is held by
 * the stream until the relay starts, and goes to the target first.
 */
export function serveFramedStream(stream: FramedStream, open: OpenPayload, options: AgentStreamOptions): void {
  const { log } = options;
  if (open.kind !== StreamKind.CONNECT) return refuse(stream, ErrorCodes.TARGET_INVALID, `a stream of kind ${open.kind} is not served`);
  let host: string;
  let port: number;
  try {
    const parsed = parseTarget(open.target);
    if (parsed.scheme !== undefined) throw new GateError(ErrorCodes.TARGET_INVALID, 'a stream opens host:port');
    ({ host, port } = parsed);
  } catch (err) {
    return refuse(stream, ErrorCodes.TARGET_INVALID, (err as Error).message);
  }
  const target = formatHostPort(host, port);
  if (!options.allow(target)) {
    log.warn({ target, code: ErrorCodes.AGENT_TARGET_DENIED }, 'refused a stream to a target outside the policy');
    return refuse(stream, ErrorCodes.AGENT_TARGET_DENIED, `this agent does not serve ${target}`);
  }
  const client = open.client || undefined;
  const failed = (outcome: GateError): void => {
    log.warn({ target, code: outcome.code, err: outcome }, 'could not reach the target');
    refuse(stream, outcome.code, outcome.message);
  };
  if (handlesAvailable && !options.sockets) {
    const cancel = connectDirectHandle(host, port, options.dialTimeoutMs, (outcome: TcpHandle | GateError) => {
      stream.removeListener('close', cancel);
      if (outcome instanceof GateError) return failed(outcome);
      if (stream.closed) return closeHandle(outcome);
      outcome.setNoDelay(true);
      log.debug({ target, client }, 'stream opened');
      stream.respond({ status: 200, code: '', reason: '' });
      let untrack: (() => void) | undefined;
      const relay = new FramedRelay(outcome, stream, {
        release: resetConnectError,
        onClose: (failure) => {
          untrack?.();
          if (failure) log.debug({ target, failure }, 'tunnel stream ended with an error');
        },
      });
      untrack = options.track(relay);
      relay.start();
    });
    stream.once('close', cancel);
    return;
  }
  serveOnSocket(stream, host, port, target, client, options, failed);
}

/** The same on net.Socket, where bare handles are not available (a fresh Buffer per read: the fallback is not the fast path). */
function serveOnSocket(
  stream: FramedStream,
  host: string,
  port: number,
  target: string,
  client: string | undefined,
  options: AgentStreamOptions,
  failed: (outcome: GateError) => void,
): void {
  const { log } = options;
  const cancel = connectDirect(host, port, { timeoutMs: options.dialTimeoutMs, allowHalfOpen: true }, (outcome) => {
    stream.removeListener('close', cancel);
    if (outcome instanceof GateError) return failed(outcome);
    const socket = outcome as Socket;
    if (stream.closed) {
      socket.destroy();
      return;
    }
    socket.setNoDelay(true);
    const untrack = options.track(socket);
    log.debug({ target, client }, 'stream opened');
    stream.respond({ status: 200, code: '', reason: '' });
    pipeSocket(stream, socket, untrack);
  });
  stream.once('close', cancel);
}

/**
 * A socket and a framed stream, both ways, with backpressure, half-close and resets: the
 * fallback FramedRelay stands in for where libuv handles cannot be taken.
 */
function pipeSocket(stream: FramedStream, socket: Socket, untrack: (() => void) | undefined): void {
  stream.on('data', (chunk: Buffer) => {
    if (!socket.write(chunk)) {
      stream.pause();
      socket.once('drain', () => stream.resume());
    }
  });
  stream.once('end', () => socket.end());
  socket.on('data', (chunk: Buffer) => {
    if (!stream.write(chunk)) {
      socket.pause();
      stream.once('drain', () => socket.resume());
    }
  });
  socket.once('end', () => stream.end());
  socket.once('error', () => stream.reset(WireError.CONNECT_ERROR, 'the target connection failed'));
  socket.once('close', () => {
    untrack?.();
    if (!stream.closed && (!socket.readableEnded || !socket.writableFinished))
      stream.reset(WireError.CONNECT_ERROR, 'the target connection closed');
  });
  stream.once('close', () => {
    if (stream.closeCode !== undefined) socket.destroy();
  });
  stream.resume();
}
