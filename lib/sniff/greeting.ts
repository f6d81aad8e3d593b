/**
 * Three-state sniffers that only look at bytes (one file per protocol, re-exported here), and the
 * one function that combines them. Nothing is consumed: the caller keeps the bytes and replays them.
 */
import { sniffHttp1, sniffHttp2 } from './http.js';
import { sniffPostgres } from './postgres.js';
import { sniffProxyV1, sniffProxyV2 } from './proxy.js';
import { sniffSsh } from './ssh.js';
import { sniffTls } from './tls.js';
import { NO, type GreetingProtocol, type GreetingResult, type Sniff } from './types.js';

export type { GreetingProtocol, GreetingResult, Sniff } from './types.js';
export { sniffTls } from './tls.js';
export { sniffSsh } from './ssh.js';
export { sniffHttp1, sniffHttp2, HTTP1_METHODS, HTTP2_PREFACE } from './http.js';
export { sniffProxyV1, sniffProxyV2, PROXY_V2_SIGNATURE } from './proxy.js';
export { sniffPostgres, SSL_REQUEST_CODE, GSSENC_REQUEST_CODE, CANCEL_REQUEST_CODE, PROTOCOL_3_0 } from './postgres.js';

const SNIFFERS: ReadonlyArray<readonly [GreetingProtocol, (buf: Uint8Array) => Sniff]> = [
  ['proxy-v2', sniffProxyV2],
  ['proxy-v1', sniffProxyV1],
  ['tls', sniffTls],
  ['ssh', sniffSsh],
  ['h2', sniffHttp2],
  ['http1', sniffHttp1],
];

/**
 * Runs every sniffer: the first match wins; 'need' (the fewest bytes any candidate still needs)
 * while any could still match; else 'no'. The literals are pairwise prefix-free, so a match never
 * hides a longer candidate, and most greetings are decided by their first byte.
 */
export function sniffGreeting(buf: Uint8Array): GreetingResult {
  let need = Infinity;
  for (const [protocol, sniff] of SNIFFERS) {
    const s = sniff(buf);
    if (s.verdict === 'match')
      return s.length === undefined ? { verdict: 'match', protocol } : { verdict: 'match', protocol, length: s.length };
    if (s.verdict === 'need' && s.bytes < need) need = s.bytes;
  }
  const pg = sniffPostgres(buf);
  if (pg.verdict === 'match') return pg;
  if (pg.verdict === 'need' && pg.bytes < need) need = pg.bytes;
  return need === Infinity ? NO : { verdict: 'need', bytes: need };
}
