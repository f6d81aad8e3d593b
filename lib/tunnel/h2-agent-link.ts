// An agent's tunnel as HTTP/2, the proxy being the session's client (agent-link.ts says why a link).
import { EventEmitter } from 'node:events';
import { type ClientHttp2Session, type ClientHttp2Stream, connect, constants } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import type { GateError } from '../errors.js';
import { refusalDebugData } from './admission.js';
import type { AgentLink, ConnectRequest, DescribeReader, DescribeRequest, LinkAnswerOptions } from './agent-link.js';
import type { TunnelStream } from './tunnel-stream.js';
import { type ClusterView, clusterViewRequestHeaders } from './cluster-view.js';
import { awaitConnectAnswer } from './connect-answer.js';
import { connectRequestHeaders, h2ErrorName } from './connect-request.js';
import { describeRequestHeaders, readLines } from './describe-stream.js';
import { refuseWithGoAway } from './goaway-refusal.js';
import { jsStreamOver } from './js-stream.js';
import { TUNNEL_SESSION_SETTINGS, TUNNEL_WINDOW_BYTES } from './settings.js';

export class Http2AgentLink extends EventEmitter implements AgentLink {
  readonly protocol = 'http2';
  readonly session: ClientHttp2Session;

  constructor(
    private readonly socket: TLSSocket,
    /** The agent's name, for messages. */
    private readonly agent: string,
  ) {
    super();
    // The session takes the TLS socket's native stream over: tunnel bytes go from OpenSSL to
    // nghttp2 in C++, without a JavaScript read and write per chunk (see terminate.ts for
    // why a hand-built TLSSocket once could not be handed over and needed jsStreamOver).
    const session = connect('http://agent.tunnel', { createConnection: () => socket, settings: TUNNEL_SESSION_SETTINGS });
    this.session = session;
    session.on('error', (err) => this.emit('error', err));
    // An agent going away cleanly says so with GOAWAY; our side closes too once its streams are
    // done, so the connection does not linger.
    session.on('goaway', (errorCode: number) => {
      this.emit('goaway', `agent sent GOAWAY (${h2ErrorName(errorCode)})`);
      if (!session.closed && !session.destroyed) session.close();
    });
    session.once('connect', () => {
      if (!session.destroyed) session.setLocalWindowSize(TUNNEL_WINDOW_BYTES);
    });
    session.once('close', () => this.emit('close'));
  }

  get peer(): ClientHttp2Session {
    return this.session;
  }

  get usable(): boolean {
    return !this.session.closed && !this.session.destroyed;
  }

  connect(request: ConnectRequest, answer: LinkAnswerOptions, counted: (reset: boolean) => void): Promise<TunnelStream> {
    const stream = this.session.request(connectRequestHeaders(request.target, request.client), { endStream: false });
    if (request.firstBytes) stream.write(request.firstBytes);
    stream.once('close', () => counted(stream.rstCode !== undefined && stream.rstCode !== constants.NGHTTP2_NO_ERROR));
    return awaitConnectAnswer(stream, { ...answer, lost: () => answer.lost(this.lossReason(stream)) });
  }

  /** Why `stream` ended before it was answered, in words. */
  private lossReason(stream: TunnelStream): string {
    if (this.session.destroyed || this.session.closed) return `agent ${this.agent} disconnected`;
    return `stream reset by the agent (${h2ErrorName((stream as ClientHttp2Stream).rstCode)})`;
  }

  /**
   * One header-only stream carrying the view. The proxy is the session's client, and SETTINGS
   * cannot carry it (custom SETTINGS are not in Node 20, and are for the connection's parameters,
   * not data), so the proxy uses what a client can always do: a request. The agent answers 204;
   * an older agent answers 400 as to any non-CONNECT stream.
   */
  sendView(view: ClusterView, unsupported: (status: number) => void): void {
    const stream = this.session.request(clusterViewRequestHeaders(view), { endStream: true });
    stream.on('error', (err) => this.emit('error', err));
    stream.once('response', (headers) => {
      const status = Number(headers[':status']);
      if (status < 200 || status >= 300) unsupported(status);
    });
    stream.resume(); // a refusal may carry a body; read and drop it so the stream can close
  }

  describe(maxLineBytes: number, reader: DescribeReader): DescribeRequest | undefined {
    let stream: ClientHttp2Stream;
    try {
      stream = this.session.request(describeRequestHeaders(), { endStream: false });
    } catch {
      return undefined;
    }
    stream.on('error', (err) => this.emit('error', err));
    stream.once('response', (headers) => {
      const status = Number(headers[':status']);
      if (status !== 200) stream.resume();
      reader.answer(status);
      if (status === 200) readLines(stream, maxLineBytes, reader.line, reader.overflow);
    });
    return {
      admit: () => {
        if (!stream.destroyed) stream.end();
      },
      refuse: () => {
        if (!stream.destroyed) stream.close(constants.NGHTTP2_REFUSED_STREAM);
      },
    };
  }

  goAway(): void {
    if (this.usable) this.session.close();
  }

  refuse(error: GateError): void {
    refuseWithGoAway(this.session, this.socket, error);
  }

  tell(error: GateError): void {
    if (!this.session.closed) this.session.goaway(constants.NGHTTP2_REFUSED_STREAM, 0, refusalDebugData(error));
  }

  destroy(error?: GateError): void {
    this.session.destroy(error);
    this.socket.destroy();
  }
}

/**
 * Refuses an agent that chose HTTP/2 before any session began: a session is started only to say
 * why in its GOAWAY, then the socket is destroyed with `error`.
 */
export function refuseHttp2Agent(socket: TLSSocket, error: GateError): void {
  const session = connect('http://agent.tunnel', {
    createConnection: () => jsStreamOver(socket, { destroyError: () => error }),
    settings: TUNNEL_SESSION_SETTINGS,
  });
  session.on('error', () => {}); // the agent may already be gone; the refusal is logged by the caller
  refuseWithGoAway(session, socket, error, { onceConnected: true });
}
