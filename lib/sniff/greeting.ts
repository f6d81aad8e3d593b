// CONTRACT (implementation pending): three-state sniffers that only look at bytes.

/** What a sniffer says about the bytes seen so far. `length` is the greeting's size when fixed. */
export type Sniff =
  | { verdict: 'match'; length?: number }
  | { verdict: 'no' }
  | { verdict: 'need'; bytes: number };

export type GreetingProtocol =
  | 'tls' // TLS handshake record 0x16 0x03 0x00..0x04
  | 'ssh' // "SSH-"
  | 'http1' // an HTTP/1.x method token followed by a space
  | 'h2' // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
  | 'postgres-ssl' // SSLRequest (length 8, code 80877103)
  | 'postgres-gssenc' // GSSENCRequest (length 8, code 80877104)
  | 'postgres-cancel' // CancelRequest (length 16, code 80877102)
  | 'postgres-startup' // StartupMessage protocol 3.0
  | 'proxy-v1' // "PROXY "
  | 'proxy-v2'; // the 12-byte v2 signature

export type GreetingResult =
  | { verdict: 'match'; protocol: GreetingProtocol; length?: number }
  | { verdict: 'no' }
  | { verdict: 'need'; bytes: number };

export declare function sniffTls(buf: Uint8Array): Sniff;
export declare function sniffSsh(buf: Uint8Array): Sniff;
export declare function sniffHttp1(buf: Uint8Array): Sniff;
export declare function sniffHttp2(buf: Uint8Array): Sniff;
export declare function sniffProxyV1(buf: Uint8Array): Sniff;
export declare function sniffProxyV2(buf: Uint8Array): Sniff;
/** Any Postgres front-end first message; `protocol` tells which one. */
export declare function sniffPostgres(buf: Uint8Array): GreetingResult;
/** Runs every sniffer: the first match wins; 'need' while any sniffer could still match; else 'no'. */
export declare function sniffGreeting(buf: Uint8Array): GreetingResult;
