// The opener's side of one stream of a tunnel or a peering session (lib/tunnel-framing): the wait
// for its ANSWER, with the caller's errors, so the registry and the peer pool report alike.
import { ErrorCodes, GateError } from '../errors.js';
import { type DialCancel, cancelReason, stopWaiting, whenCancelled } from '../transport/dial-cancel.js';
import { releaseFramedStream } from '../tunnel-framing/framed-relay.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import type { AnswerPayload } from '../tunnel-framing/frames.js';
import { type Refusal, refusalCode } from './refusal-status.js';

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

/** An answer's refusal: the code it named (GATE_ERR_* only, else undefined) and its reason. */
export function framedRefusal(answer: AnswerPayload): Refusal {
  return { code: refusalCode(answer.code), message: answer.reason || `status ${answer.status}` };
}

/**
 * Waits for the answer to a stream this side opened: resolves with the stream on 200, rejects with
 * the caller's error otherwise. On a rejection the stream is let go with a FIN
 * (releaseFramedStream), whether the caller cancelled (its client left) or the other side did not
 * answer in time: a FIN spends none of the other side's reset budget. A refused stream is closed
 * already.
 */
export function awaitFramedAnswer(stream: FramedStream, options: ConnectAnswerOptions): Promise<FramedStream> {
  return new Promise<FramedStream>((resolve, reject) => {
    let settled = false;
    /** `closing`: the stream closes already (refused, or closed): nothing to let go. */
    const done = (err: GateError | undefined, closing = false): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stopWaiting(options.cancel, onAbort);
      stream.removeListener('response', onResponse);
      stream.removeListener('close', onClose);
      if (!err) return resolve(stream);
      if (closing) return reject(err);
      // Released, never reset, even when the other side was too slow to answer: a stream reset
      // before its answer is what the other side's rapid-reset budget counts (framed-session.ts),
      // and a slow target is no abuse. The stream keeps its slot until the answer comes.
      releaseFramedStream(stream);
      reject(err);
    };
    const onResponse = (answer: AnswerPayload): void => {
      if (answer.status === 200) return done(undefined);
      done(options.refused(framedRefusal(answer)), true);
    };
    const onClose = (): void => done(options.lost(), true);
    const onAbort = (): void =>
      done(new GateError(ErrorCodes.DIAL_ABORTED, `${options.where}: aborted`, { cause: cancelReason(options.cancel) }));
    const timer = setTimeout(() => done(options.timedOut()), options.timeoutMs);
    stream.once('response', onResponse);
    stream.once('close', onClose);
    whenCancelled(options.cancel, onAbort);
  });
}
