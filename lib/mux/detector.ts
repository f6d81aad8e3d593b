import { ErrorCodes, GateError } from '../errors.js';
import { parseClientHello, ClientHelloError, type ClientHello } from '../tls/client-hello.js';
import { TlsAlert } from '../tls/alert.js';
import { sniffGreeting } from '../sniff/greeting.js';
import { parseProxyHeader, ProxyHeaderError, type ProxyHeader } from '../proxy-protocol/header.js';
import type { DetectedProtocol } from '../handlers/types.js';

export interface Detected {
  protocol: DetectedProtocol;
  hello: ClientHello | undefined;
  proxyHeader: ProxyHeader | undefined;
  postgresSslRequest: boolean;
  /** Bytes read but not consumed by detection: they go back into the socket for the handler. */
  rest: Buffer;
}

export type DetectStep =
  | { status: 'need'; reply?: Buffer }
  | { status: 'done'; detected: Detected; reply?: Buffer }
  | { status: 'failed'; error: GateError; alert?: number };

export interface DetectorOptions {
  maxHelloBytes: number;
  /** 'required': the first bytes must be a PROXY header; 'refused': a PROXY header is an error. */
  proxyHeader: 'required' | 'refused';
}

const EMPTY = Buffer.alloc(0);
const ANSWER_SSL_YES = Buffer.from('S');
const ANSWER_GSSENC_NO = Buffer.from('N');
/**
 * Record headers allowed beyond the handshake cap. A hello split into tiny records is legal
 * (some clients do it; 1-byte records cost 5 header bytes each), so the bound on bytes held
 * during detection is the handshake cap plus this slack: a ~2 KB post-quantum hello still fits
 * in 1-byte records, and no client can make us hold more than cap + slack.
 */
const RECORD_SLACK_BYTES = 4096;

/**
 * The decision procedure of one connection, fed the bytes as they arrive. Pure: no socket, no
 * timer; the caller writes the `reply` bytes (Postgres negotiation answers) and owns deadlines.
 */
export class Detector {
  private buf: Buffer = EMPTY;
  private phase: 'proxy' | 'greeting' | 'tls-after-ssl-request' | 'hello';
  private proxyHeader: ProxyHeader | undefined;
  private postgresSslRequest = false;
  private readonly maxHeld: number;

  constructor(private readonly options: DetectorOptions) {
    this.phase = options.proxyHeader === 'required' ? 'proxy' : 'greeting';
    this.maxHeld = options.maxHelloBytes + RECORD_SLACK_BYTES;
  }

  /** The PROXY header, as soon as it has been read (before the rest of detection is done). */
  get acceptedProxyHeader(): ProxyHeader | undefined {
    return this.proxyHeader;
  }

  /**
   * How far an undecided connection got, for its log line (so a client that sent part of
   * a TLS record and closed is told apart from one that sent nothing): `nothing`,
   * `proxy-header-partial`, `proxy-header` (a header and nothing after it), `greeting-partial`,
   * `postgres-ssl-request` (answered, no TLS yet), `tls-partial` (part of a TLS record or hello).
   */
  get stage(): string {
    switch (this.phase) {
      case 'proxy':
        return this.buf.length === 0 ? 'nothing' : 'proxy-header-partial';
      case 'hello':
        return 'tls-partial';
      case 'tls-after-ssl-request':
        return this.buf.length === 0 ? 'postgres-ssl-request' : 'tls-partial';
      default:
        // 0x16: a TLS handshake record begun (RFC 8446 §5.1), too short yet for the sniffer to say.
        if (this.buf.length > 0) return this.buf[0] === 0x16 ? 'tls-partial' : 'greeting-partial';
        return this.proxyHeader ? 'proxy-header' : 'nothing';
    }
  }

  /** Bytes held so far (for the per-connection memory bound and logs). */
  get held(): number {
    return this.buf.length;
  }

  feed(chunk: Buffer): DetectStep {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    let reply: Buffer | undefined;
    for (;;) {
      const step = this.step();
      if (step === 'again') continue;
      // The bound applies only while undecided: a client may pipeline its first request behind
      // its greeting in one large segment ("SSH-2.0-x\r\n" + 200 KB), and that is decided by
      // its first bytes. Undecided, we hold at most the cap plus one socket read.
      if (step.status === 'need' && this.buf.length > this.maxHeld) {
        return this.fail(
          new GateError(ErrorCodes.HELLO_TOO_LARGE, `more than ${this.maxHeld} bytes before a routing decision`),
          this.phase === 'hello' ? TlsAlert.decodeError : undefined,
        );
      }
      if (step.status === 'need' || step.status === 'done') {
        if ('reply' in step && step.reply) reply = step.reply;
        if (reply) return { ...step, reply };
      }
      return step;
    }
  }

  private fail(error: GateError, alert?: number): DetectStep {
    this.buf = EMPTY;
    return alert === undefined ? { status: 'failed', error } : { status: 'failed', error, alert };
  }

  private done(protocol: DetectedProtocol, hello?: ClientHello): DetectStep {
    const detected: Detected = {
      protocol,
      hello,
      proxyHeader: this.proxyHeader,
      postgresSslRequest: this.postgresSslRequest,
      rest: this.buf,
    };
    this.buf = EMPTY;
    return { status: 'done', detected };
  }

  private consume(n: number): void {
    this.buf = n >= this.buf.length ? EMPTY : this.buf.subarray(n);
  }

  private step(): DetectStep | 'again' {
    switch (this.phase) {
      case 'proxy':
        return this.stepProxy();
      case 'hello':
        return this.stepHello();
      default:
        return this.stepGreeting();
    }
  }

  private stepProxy(): DetectStep | 'again' {
    try {
      const result = parseProxyHeader(this.buf);
      if (result.status === 'need') return { status: 'need' };
      this.proxyHeader = result.header;
      this.consume(result.header.length);
      this.phase = 'greeting';
      return this.buf.length > 0 ? 'again' : { status: 'need' };
    } catch (err) {
      if (err instanceof ProxyHeaderError) return this.fail(err);
      throw err;
    }
  }

  private stepGreeting(): DetectStep | 'again' {
    if (this.buf.length === 0) return { status: 'need' };
    const sniff = sniffGreeting(this.buf);
    if (sniff.verdict === 'need') return { status: 'need' };
    if (sniff.verdict === 'no') {
      return this.fail(new GateError(ErrorCodes.UNKNOWN_PROTOCOL, `unrecognised first bytes ${this.buf.subarray(0, 8).toString('hex')}`));
    }
    const afterSslRequest = this.phase === 'tls-after-ssl-request';
    if (afterSslRequest && sniff.protocol !== 'tls') {
      return this.fail(new GateError(ErrorCodes.NOT_TLS, `expected TLS after the Postgres SSLRequest, got ${sniff.protocol}`));
    }
    switch (sniff.protocol) {
      case 'tls':
        this.phase = 'hello';
        return 'again';
      case 'ssh':
        return this.done('ssh');
      case 'http1':
        return this.done('http1');
      case 'h2':
        return this.done('h2');
      case 'postgres-startup':
      case 'postgres-cancel':
        return this.done('postgres');
      case 'postgres-ssl':
      case 'postgres-gssenc': {
        this.consume(8);
        // A client must wait for our one-byte answer before it starts TLS; bytes already queued
        // behind the request were written blind and would be spliced into the session
        // (CVE-2021-23222 / CVE-2021-23214 class of injection), so they are refused.
        if (this.buf.length > 0) {
          return this.fail(
            new GateError(ErrorCodes.UNKNOWN_PROTOCOL, 'bytes sent after a Postgres SSLRequest/GSSENCRequest before its answer'),
          );
        }
        if (sniff.protocol === 'postgres-gssenc') return { status: 'need', reply: ANSWER_GSSENC_NO };
        if (this.postgresSslRequest) return this.fail(new GateError(ErrorCodes.UNKNOWN_PROTOCOL, 'second Postgres SSLRequest'));
        this.postgresSslRequest = true;
        this.phase = 'tls-after-ssl-request';
        return { status: 'need', reply: ANSWER_SSL_YES };
      }
      case 'proxy-v1':
      case 'proxy-v2':
        // Only reached when headers are refused, or for a second header after an accepted one.
        return this.fail(
          new GateError(
            ErrorCodes.PROXY_HEADER_REFUSED,
            this.proxyHeader ? 'a second PROXY header' : 'PROXY header from a client while PROXY protocol is off',
          ),
        );
    }
  }

  private stepHello(): DetectStep {
    try {
      const result = parseClientHello(this.buf, { maxHandshakeBytes: this.options.maxHelloBytes });
      if (result.status === 'need') return { status: 'need' };
      return this.done(this.postgresSslRequest ? 'postgres' : 'tls', result.hello);
    } catch (err) {
      if (err instanceof ClientHelloError) return this.fail(err, TlsAlert.decodeError);
      throw err;
    }
  }
}
