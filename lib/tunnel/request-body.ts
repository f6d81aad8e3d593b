import type { IncomingMessage } from 'node:http';
import { ErrorCodes, GateError } from '../errors.js';

export interface BodyLimits {
  /** Bytes; a body announcing or sending more is refused unread (GATE_ERR_REQUEST_TOO_LARGE). */
  maxBytes: number;
  /** Milliseconds from the call for the whole body (GATE_ERR_REQUEST_BODY_TIMEOUT). */
  timeoutMs: number;
}

/**
 * A request body, bounded in size and in time: a client that announces too much, sends too much,
 * or dribbles is refused as soon as that is known, and its request destroyed, so it holds neither
 * memory nor a timer past the bound.
 */
export function readBody(req: IncomingMessage, limits: BodyLimits): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const announced = Number(req.headers['content-length']);
    if (announced > limits.maxBytes) {
      reject(new GateError(ErrorCodes.REQUEST_TOO_LARGE, `request body of ${announced} bytes announced, over ${limits.maxBytes}`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error: GateError | undefined): void => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      if (error) reject(error);
      else resolve(Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limits.maxBytes) return finish(new GateError(ErrorCodes.REQUEST_TOO_LARGE, `request body over ${limits.maxBytes} bytes`));
      chunks.push(chunk);
    };
    const onEnd = (): void => finish(undefined);
    const onError = (err: Error): void =>
      finish(new GateError(ErrorCodes.INVALID_ARGUMENT, `request body failed: ${err.message}`, { cause: err }));
    const timer = setTimeout(
      () => finish(new GateError(ErrorCodes.REQUEST_BODY_TIMEOUT, `request body not complete within ${limits.timeoutMs} ms`)),
      limits.timeoutMs,
    );
    timer.unref();
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
  });
}
