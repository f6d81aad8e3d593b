/** What a sniffer says about the bytes seen so far. `length` is the greeting's size when fixed. */
export type Sniff = { verdict: 'match'; length?: number } | { verdict: 'no' } | { verdict: 'need'; bytes: number };

export type GreetingProtocol =
  | 'tls' // TLS handshake record 0x16 0x03 0x00..0x04
  | 'ssh' // "SSH-"
  | 'http1' // an HTTP/1.x method token followed by a space
  | 'h2' // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
  | 'postgres-ssl' // SSLRequest (length 8, code 80877103)
  | 'postgres-gssenc' // GSSENCRequest (length 8, code 80877104)
  | 'postgres-cancel' // CancelRequest (length 16, code 80877102; up to 268 with protocol 3.2 keys)
  | 'postgres-startup' // StartupMessage protocol 3.x
  | 'proxy-v1' // "PROXY "
  | 'proxy-v2'; // the 12-byte v2 signature

export type GreetingResult =
  | { verdict: 'match'; protocol: GreetingProtocol; length?: number }
  | { verdict: 'no' }
  | { verdict: 'need'; bytes: number };

export const NO: Sniff & GreetingResult = Object.freeze({ verdict: 'no' });
