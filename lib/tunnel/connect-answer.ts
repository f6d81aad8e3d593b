import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { ErrorCodes, GateError } from '../errors.js';
import { type DialCancel, cancelReason, stopWaiting, whenCancelled } from '../transport/dial-cancel.js';
import { readRefusal, type Refusal } from './connect-request.js';
import { releaseStream } from './release-stream.js';

export interface ConnectAnswerOptions {
  timeoutMs: number;
  /**
   * Cancels the wait (the client left): the client's DialCancel (lib/transport/dial-cancel.ts),
   * which the tunnel's handlers pass, or a caller's own AbortSignal. Openers pass
   * `options.cancel ?? options.signal`, so that a cancel's signal is never made for nothing.
   */
  cancel?: DialCancel | AbortSignal | undefined;
  /** `agent x -> host:port`, for messages. */
  where: string;
  /** The error for a refusal (a non-200 answer) with the code and reason the other side gave. */
  refused: (refusal: Refusal) => GateError;
  /** The error for a stream that closed before any answer. */
  lost: () => GateError;
  /** The error for no answer within `timeoutMs`. */
  timedOut: () => GateError;
}

/**
 * Waits for the answer to a CONNECT stream (lib/tunnel/connect-request.ts): resolves with the
 * stream on 200, rejects with the caller's error otherwise. On a rejection the stream is let go:
 * released with END_STREAM when the caller cancelled (its client left; see release-stream.ts),
 * cancelled when the other side did not answer in time. Used for agents' tunnels and for peering.
 */
export function awaitConnectAnswer(stream: ClientHttp2Stream, options: ConnectAnswerOptions): Promise<ClientHttp2Stream> {
  return new Promise<ClientHttp2Stream>((resolve, reject) => {
    let settled = false;
    const done = (err: GateError | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stopWaiting(options.cancel, onAbort);
      stream.removeListener('response', onResponse);
      stream.removeListener('close', onClose);
      if (!err) return resolve(stream);
      if (err.code === ErrorCodes.DIAL_ABORTED) releaseStream(stream);
      else if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
      reject(err);
    };
    const onResponse = (headers: IncomingHttpHeaders): void => {
      if (Number(headers[':status']) === 200) return done(undefined);
      done(options.refused(readRefusal(headers)));
    };
    const onClose = (): void => done(options.lost());
    const onAbort = (): void =>
      done(new GateError(ErrorCodes.DIAL_ABORTED, `${options.where}: aborted`, { cause: cancelReason(options.cancel) }));
    const timer = setTimeout(() => done(options.timedOut()), options.timeoutMs);
    stream.on('error', ignore); // the outcome is read from 'close' and rstCode
    stream.once('response', onResponse);
    stream.once('close', onClose);
    whenCancelled(options.cancel, onAbort);
  });
}

function ignore(): void {}
