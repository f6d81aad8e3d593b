import type { Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { IncomingMessage } from 'node:http';
import { WebSocket } from 'ws';
import { ErrorCodes, GateError } from '../errors.js';
import { CONNECTION_UPGRADE_PATH, UPGRADE_PROTOCOLS } from '../wire/names.js';
import { CLOSE_TIMEOUT_MS, DEFAULT_MAX_MESSAGE_BYTES, WebSocketStream } from './websocket-stream.js';

export interface OpenUpgradeOptions {
  /** The load balancer's address as dialled (`host:port`, IPv6 bracketed): the Host header. */
  authority: string;
  /** SNI and the name the balancer's certificate is checked against (undefined for an IP address). */
  servername: string | undefined;
  /** Trust for the balancer's certificate; default the system store and NODE_EXTRA_CA_CERTS. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Default true. */
  rejectUnauthorized?: boolean;
  /** Deadline for the TLS handshake with the balancer and the upgrade's answer together. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** Largest message accepted from the proxy (default 64 KiB, the proxy's own limit). */
  maxMessageBytes?: number;
}

/**
 * The client side of the connection upgrade, on a connection already open to the load balancer
 * (direct, or through CONNECT): TLS with the balancer, which it trusts as any HTTPS client does,
 * then `GET /webapi/connectionupgrade` asking for `alpn-ping` (or `alpn`). Resolves with the byte
 * stream inside the WebSocket, for the caller's own TLS to the proxy. A refusal (any answer but
 * 101, or 101 with no sub-protocol of ours) is GATE_ERR_CONN_UPGRADE_REFUSED with the status;
 * the balancer's certificate failing is GATE_ERR_TLS_HANDSHAKE; the deadline
 * GATE_ERR_TLS_HANDSHAKE_TIMEOUT. Every socket is destroyed on failure.
 */
export function openUpgrade(raw: Socket, options: OpenUpgradeOptions): Promise<WebSocketStream> {
  const where = `load balancer ${options.authority}`;
  return new Promise<WebSocketStream>((resolve, reject) => {
    let ws: WebSocket | undefined;
    let settled = false;
    const tls: TLSSocket = tlsConnect({
      socket: raw,
      ...(options.servername === undefined ? {} : { servername: options.servername }),
      ALPNProtocols: ['http/1.1'],
      ...(options.ca === undefined ? {} : { ca: options.ca }),
      rejectUnauthorized: options.rejectUnauthorized ?? true,
    });
    const finish = (error: GateError | undefined, stream?: WebSocketStream): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      tls.removeListener('error', onTlsError);
      if (error) {
        ws?.terminate();
        tls.destroy();
        raw.destroy();
        reject(error);
      } else resolve(stream!);
    };
    const onTlsError = (err: Error): void =>
      finish(
        new GateError(ErrorCodes.TLS_HANDSHAKE, `TLS to ${where} (for the connection upgrade) failed: ${err.message}`, { cause: err }),
      );
    const onAbort = (): void =>
      finish(new GateError(ErrorCodes.DIAL_ABORTED, `connection upgrade at ${where} aborted`, { cause: options.signal?.reason }));
    const timer = setTimeout(
      () =>
        finish(new GateError(ErrorCodes.TLS_HANDSHAKE_TIMEOUT, `connection upgrade at ${where}: no answer within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
    tls.once('error', onTlsError);
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    tls.once('secureConnect', () => {
      const socket = (ws = new WebSocket(`wss://${options.authority}${CONNECTION_UPGRADE_PATH}`, [...UPGRADE_PROTOCOLS], {
        createConnection: () => tls,
        perMessageDeflate: false,
        maxPayload: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
        followRedirects: false,
        closeTimeout: CLOSE_TIMEOUT_MS, // known to ws 8.18+, not to its type declarations
      } as ConstructorParameters<typeof WebSocket>[2]));
      socket.once('unexpected-response', (_req, res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (body.length < 512) body += chunk;
        });
        const done = (): void =>
          finish(
            new GateError(
              ErrorCodes.CONN_UPGRADE_REFUSED,
              `connection upgrade refused by ${where}: HTTP ${status}${body ? ` ${body.slice(0, 512)}` : ''}`,
            ),
          );
        res.once('end', done);
        res.once('error', done);
        res.once('close', done);
      });
      socket.once('error', (err: Error) =>
        finish(new GateError(ErrorCodes.CONN_UPGRADE_REFUSED, `connection upgrade at ${where} failed: ${err.message}`, { cause: err })),
      );
      socket.once('open', () => {
        // ws already refuses a 101 whose protocol we did not offer; one with none is refused here.
        if (socket.protocol === '') {
          finish(
            new GateError(
              ErrorCodes.CONN_UPGRADE_REFUSED,
              `connection upgrade at ${where}: answered 101 without a sub-protocol (not a gate-mux proxy?)`,
            ),
          );
          return;
        }
        socket.removeAllListeners('error');
        finish(undefined, new WebSocketStream(socket));
      });
    });
  });
}
