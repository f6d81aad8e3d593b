import type { Duplex } from 'node:stream';
import type { Logger } from '../log.js';
import type { ConnectionInfo } from '../mux/types.js';

/** What a handler gets from the multiplexer besides the socket. */
export interface HandlerContext {
  readonly info: ConnectionInfo;
  readonly logger: Logger;
  /** Registers a stream belonging to this connection so shutdown and failures destroy it too. */
  adopt(stream: Duplex, side?: 'client' | 'upstream'): void;
  /** Ends the connection with an error: logged once with route, code and byte counts. */
  fail(error: Error): void;
}
