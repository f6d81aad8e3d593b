import { answer, NEED_MORE, type RefusalAnswer } from './step.js';
import type { FailureKind, RouteFailure } from './failure.js';

/**
 * HTTP/1.x: the client speaks first, so the failure is the response to its request: 502 Bad
 * Gateway, 503 Service Unavailable for overload (with Retry-After), 504 Gateway Timeout (RFC 9110
 * §15.6), with a short body naming the code, JSON when the request's Accept asked for it. The
 * response waits for the end of the request's head, and always closes the connection.
 */

const STATUS: Record<FailureKind, [number, string]> = {
  unavailable: [502, 'Bad Gateway'],
  denied: [502, 'Bad Gateway'],
  failed: [502, 'Bad Gateway'],
  timeout: [504, 'Gateway Timeout'],
  busy: [503, 'Service Unavailable'],
};

const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');

export function httpRefusal(received: Buffer, failure: RouteFailure, final: boolean): RefusalAnswer {
  const end = received.indexOf(HEAD_END);
  if (end < 0 && !final) return NEED_MORE;
  const head = received.subarray(0, end < 0 ? received.length : end).toString('latin1');
  return answer(httpResponse(failure, wantsJson(head)));
}

/** True when the request's Accept header names a JSON media type (RFC 9110 §12.5.1). */
export function wantsJson(head: string): boolean {
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    if (colon < 0 || line.slice(0, colon).trim().toLowerCase() !== 'accept') continue;
    if (/application\/(?:[a-z0-9.+-]*\+)?json/i.test(line.slice(colon + 1))) return true;
  }
  return false;
}

export function httpResponse(failure: RouteFailure, json: boolean): Buffer {
  const [status, reason] = STATUS[failure.kind];
  const body = json
    ? `${JSON.stringify({ error: { code: failure.code, message: failure.text, ...(failure.hint ? { hint: failure.hint } : {}) } })}\n`
    : `${failure.text}\n${failure.hint ? `${failure.hint}\n` : ''}`;
  const head = [
    `HTTP/1.1 ${status} ${reason}`,
    `Content-Type: ${json ? 'application/json' : 'text/plain; charset=utf-8'}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Cache-Control: no-store',
    'Connection: close',
    ...(failure.kind === 'busy' ? ['Retry-After: 5'] : []),
    `Gate-Error-Code: ${failure.code}`,
  ];
  return Buffer.from(`${head.join('\r\n')}\r\n\r\n${body}`, 'utf8');
}
