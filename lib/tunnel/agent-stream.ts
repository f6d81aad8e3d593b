// The agent's side of one stream of its tunnel (lib/tunnel-framing): the proxy opened it to reach
// a target in the agent's network.
import type { Socket } from 'node:net';
import { connectDirect } from '../client/connect-direct.js';
import { dialHandle } from '../transport/handle-dial.js';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import { closeHandle, handlesAvailable, type TcpHandle } from '../transport/uv.js';
import { FramedRelay, resetConnectError } from '../tunnel-framing/framed-relay.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import { FramedDuplex } from '../tunnel-framing/framed-duplex.js';
import { type OpenPayload, StreamKind } from '../tunnel-framing/frames.js';
import { splice } from '../transport/splice.js';
import { statusForCode } from './refusal-status.js';
import { type CheckedTarget, checkTarget } from './stream-target.js';

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

function refuse(stream: FramedStream, code: string, reason: string): void {
  stream.respond({ status: statusForCode(code), code, reason });
}

/**
 * Serves one stream the proxy opened: checks its target against the agent's policy, dials it
 * directly (the resource lives in the agent's own network: no environment proxy), answers 200 and
 * relays the stream to the target; or refuses it with a GATE_ERR_* code and a reason. A stream
 * that closes while the target is dialled cancels the dial; either side going away takes the
 * other with it. What the proxy wrote before the answer (the client's first flight) is held by
 * the stream until the relay starts, and goes to the target first.
 */
export function serveAgentStream(stream: FramedStream, open: OpenPayload, options: AgentStreamOptions): void {
  const { log } = options;
  if (open.kind !== StreamKind.CONNECT) return refuse(stream, ErrorCodes.TARGET_INVALID, `a stream of kind ${open.kind} is not served`);
  const checked = checkTarget(open.target, options);
  if (checked instanceof GateError) return refuse(stream, checked.code, checked.message);
  const { host, port, target } = checked;
  const client = open.client || undefined;
  const failed = (outcome: GateError): void => {
    log.warn({ target, code: outcome.code, err: outcome }, 'could not reach the target');
    refuse(stream, outcome.code, outcome.message);
  };
  if (handlesAvailable && !options.sockets) {
    const cancel = dialHandle(host, port, { timeoutMs: options.dialTimeoutMs }, (outcome: TcpHandle | GateError) => {
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
  serveOnSocket(stream, checked, client, options, failed);
}

/**
 * The same on net.Socket, where bare handles are not available: the stream as a Duplex, spliced
 * to the socket (the fallback is not the fast path).
 */
function serveOnSocket(
  stream: FramedStream,
  { host, port, target }: CheckedTarget,
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
    if (untrack) socket.once('close', untrack);
    log.debug({ target, client }, 'stream opened');
    stream.respond({ status: 200, code: '', reason: '' });
    const duplex = new FramedDuplex(stream);
    // Registered before splice's own: a target that failed resets the stream with CONNECT_ERROR
    // (RFC 9113 §8.5's meaning), where splice would only cancel it.
    let socketError = false;
    socket.once('error', () => (socketError = true));
    socket.once('close', () => {
      if (socketError || !socket.readableEnded || !socket.writableFinished)
        duplex.destroy(new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'the target connection failed'));
    });
    splice(duplex, socket, (err) => {
      if (err) log.debug({ target, err }, 'tunnel stream ended with an error');
    });
  });
  stream.once('close', cancel);
}
