import type { RouteFailure } from './failure.js';

/**
 * One protocol's answer to a failed route, as a pure function of what the client has sent so far.
 * Protocols where the client speaks first (PostgreSQL's startup message, a Redis command, MongoDB's
 * `hello`, an HTTP request) are answered once that first message is in; where the server speaks
 * first (MySQL's greeting, SSH's identification), at once. `final` is set when no more bytes will
 * come (the read bound or deadline passed, or the client ended): the function must decide then.
 */
export type RefusalStep = (received: Buffer, failure: RouteFailure, final: boolean) => RefusalAnswer;

/** More bytes are needed; or the bytes to send before closing (`undefined`: close without a word). */
export type RefusalAnswer = { need: true } | { need: false; bytes: Buffer | undefined };

export const NEED_MORE: RefusalAnswer = { need: true };

export function answer(bytes: Buffer | undefined): RefusalAnswer {
  return { need: false, bytes };
}

/** The most a refusal reads from its client: enough for any first message it waits for. */
export const REFUSAL_READ_LIMIT = 16 * 1024;
