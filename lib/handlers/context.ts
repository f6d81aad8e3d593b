import type { Duplex } from 'node:stream';
import type { Logger } from '../log.js';
import type { ConnectionInfo } from './types.js';

/** What a handler gets from the multiplexer besides the socket. */
export interface HandlerContext {
  readonly info: ConnectionInfo;
  readonly logger: Logger;
  /** Registers a stream belonging to this connection so shutdown and failures destroy it too. */
  adopt(stream: Duplex, side?: 'client' | 'upstream'): void;
  /** Ends the connection with an error: logged once with route, code and byte counts. */
  fail(error: Error): void;
  /** Records `error` as the connection's failure (the first one recorded is kept), ending nothing. */
  recordError(err: Error, side?: 'client' | 'upstream'): void;
}

/** Something a connection owns and destroys with it: a stream, a bare-handle client or relay. */
export interface Part {
  destroy(): void;
}

/** Byte counts of the client side, from whoever holds the client now. */
export interface ClientCounts {
  readonly bytesRead: number;
  readonly bytesWritten: number;
}

/**
 * The connection as the bare-handle forward sees it (handlers/forward-handles.ts): it adds parts
 * while dialing, hands the client over to the relay, and reports how each part ended. The
 * multiplexer's Connection implements it; handlers never import the multiplexer.
 */
export interface ConnectionParts extends HandlerContext {
  attach(part: Part): void;
  handOver(next: Part, counts: ClientCounts): void;
  closed(part: Part): void;
}
