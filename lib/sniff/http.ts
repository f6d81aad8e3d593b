import { ascii, sniffLiterals } from './prefix.js';
import type { Sniff } from './types.js';

/**
 * HTTP/1 request line: a method token and one space (RFC 9112 §3). The RFC 9110 §9 methods plus
 * PATCH (RFC 5789) and the common WebDAV ones (RFC 4918). "PRI" is deliberately absent: it only
 * starts the HTTP/2 preface (RFC 9113 §3.4), which has its own sniffer.
 */
export const HTTP1_METHODS = [
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
  'PROPFIND',
  'PROPPATCH',
  'MKCOL',
  'COPY',
  'MOVE',
  'LOCK',
  'UNLOCK',
] as const;

const METHOD_TOKENS = HTTP1_METHODS.map((m) => ascii(`${m} `));

export function sniffHttp1(buf: Uint8Array): Sniff {
  return sniffLiterals(buf, METHOD_TOKENS);
}

/** RFC 9113 §3.4: the client connection preface, 24 octets. */
export const HTTP2_PREFACE = ascii('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
const PREFACE = [HTTP2_PREFACE];

export function sniffHttp2(buf: Uint8Array): Sniff {
  return sniffLiterals(buf, PREFACE, true);
}
