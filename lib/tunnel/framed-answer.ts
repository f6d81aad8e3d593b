// The proxy's side of opening one stream of a framed tunnel (lib/tunnel-framing): what
// awaitConnectAnswer (connect-answer.ts) does for an HTTP/2 CONNECT stream, for a framed one, with
// the same options, so an opener of either kind reports the same errors. Not yet reached from the
// registry, whose tunnels speak HTTP/2 only; bench:tunnel-floor measures it.
import { ErrorCodes, GateError } from '../errors.js';
import { cancelReason, stopWaiting, whenCancelled } from '../transport/dial-cancel.js';
import { releaseFramedStream } from '../tunnel-framing/framed-relay.js';
import type { FramedStream } from '../tunnel-framing/framed-stream.js';
import type { AnswerPayload } from '../tunnel-framing/frames.js';
import type { ConnectAnswerOptions } from './connect-answer.js';
import { type Refusal, refusalCode } from './connect-request.js';

/** An answer's refusal as readRefusal (connect-request.ts) gives an HTTP/2 one. */
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
