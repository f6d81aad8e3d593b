/**
 * The proxy's answer to `CONNECT`, parsed from bytes only (no socket). RFC 9110 §9.3.6: any 2xx
 * means the tunnel is open and the bytes after the header's blank line already belong to it —
 * a proxy may send them in the same TCP segment as the status line, and https-proxy-agent 9
 * drops them, so `headerBytes` tells the caller exactly where the tunnel starts.
 */
export type ConnectResponseParse =
  | { state: 'need-more' }
  | { state: 'too-large' }
  | { state: 'malformed'; reason: string }
  | { state: 'done'; status: number; reason: string; headers: Array<[string, string]>; headerBytes: number };

/** Default cap on the response header: a hostile proxy must not make us buffer without bound. */
export const DEFAULT_MAX_CONNECT_HEADER_BYTES = 16 * 1024;

const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/;

/** Index just past the blank line ending the header (CRLF CRLF, or bare LF LF: RFC 9112 §2.2 leniency). */
function headerEnd(buf: Buffer, limit: number): number {
  const end = Math.min(buf.length, limit);
  for (let i = 0; i < end; i++) {
    if (buf[i] !== 0x0a) continue;
    if (buf[i + 1] === 0x0a) return i + 2;
    if (buf[i + 1] === 0x0d && buf[i + 2] === 0x0a) return i + 3;
  }
  return -1;
}

/**
 * Parses what has arrived so far. `too-large` once `maxHeaderBytes` bytes hold no complete
 * header. The status line is checked as soon as it is complete, so a non-HTTP answer fails
 * fast instead of waiting for the cap.
 */
export function parseConnectResponse(buf: Buffer, maxHeaderBytes = DEFAULT_MAX_CONNECT_HEADER_BYTES): ConnectResponseParse {
  const firstLf = buf.indexOf(0x0a);
  const statusLineEnd = firstLf < 0 ? -1 : firstLf;
  if (statusLineEnd >= 0) {
    const line = buf.subarray(0, statusLineEnd).toString('latin1').replace(/\r$/, '');
    if (!STATUS_LINE.test(line)) return { state: 'malformed', reason: `bad status line ${JSON.stringify(line.slice(0, 80))}` };
  } else if (buf.length >= 5 && buf.subarray(0, 5).toString('latin1') !== 'HTTP/') {
    return { state: 'malformed', reason: 'the answer is not HTTP' };
  }
  const end = headerEnd(buf, maxHeaderBytes);
  if (end < 0) return buf.length >= maxHeaderBytes ? { state: 'too-large' } : { state: 'need-more' };
  const lines = buf.subarray(0, end).toString('latin1').split(/\r?\n/);
  const match = STATUS_LINE.exec(lines[0] ?? '');
  if (!match) return { state: 'malformed', reason: 'bad status line' };
  const headers: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) return { state: 'malformed', reason: `bad header line ${JSON.stringify(line.slice(0, 80))}` };
    headers.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]);
  }
  return { state: 'done', status: Number(match[1]), reason: match[2] ?? '', headers, headerBytes: end };
}
