import { answer, NEED_MORE, type RefusalAnswer } from './step.js';
import type { RouteFailure } from './failure.js';

/**
 * Redis: the client speaks first, so the failure is the reply to its first command, a RESP simple
 * error (`-ERR <text>\r\n`, RESP2 and RESP3 alike), which redis-cli prints as `(error) ERR ...`.
 * The reply waits for the first line of the command (an inline command, or a RESP array's header)
 * so it is read as that command's reply.
 */
export function redisRefusal(received: Buffer, failure: RouteFailure, final: boolean): RefusalAnswer {
  if (!final && !received.includes(0x0a)) return NEED_MORE;
  return answer(Buffer.from(`-ERR ${failure.text}\r\n`, 'utf8'));
}
