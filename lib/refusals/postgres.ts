import { answer, NEED_MORE, type RefusalAnswer } from './step.js';
import type { FailureKind, RouteFailure } from './failure.js';

/**
 * PostgreSQL: a client speaks first (a StartupMessage, or a CancelRequest), after TLS if it asked
 * for it. The failure is answered with an ErrorResponse (protocol "Message Formats": 'E', length,
 * then fields, each a type byte and a C string, and a final zero byte) at severity FATAL, which
 * libpq prints as `FATAL:  <message>` and `HINT:  <hint>`; a CancelRequest gets no answer (the
 * server never answers one), just the close.
 */

/** Protocol codes in the first message (PostgreSQL "Message Formats"). */
const CANCEL_REQUEST = 80877102;
/** The server's own cap on a startup packet (MAX_STARTUP_PACKET_LENGTH in postmaster). */
const MAX_STARTUP = 10_000;

/**
 * SQLSTATE per kind (PostgreSQL Appendix A): class 08 "Connection Exception" for a route that
 * cannot be made, 57P03 `cannot_connect_now` for overload (what a server starting up or at its
 * limit says, and what poolers retry on).
 */
const SQLSTATE: Record<FailureKind, string> = {
  unavailable: '08001', // sqlclient_unable_to_establish_sqlconnection
  timeout: '08001',
  denied: '08004', // sqlserver_rejected_establishment_of_sqlconnection
  failed: '08006', // connection_failure
  busy: '57P03', // cannot_connect_now
};

export function postgresRefusal(received: Buffer, failure: RouteFailure, final: boolean): RefusalAnswer {
  if (received.length < 8) return final ? answer(undefined) : NEED_MORE;
  const length = received.readUInt32BE(0);
  // Not a first message a client sends: nothing to answer in.
  if (length < 8 || length > MAX_STARTUP) return answer(undefined);
  if (received.readUInt32BE(4) === CANCEL_REQUEST) return answer(undefined);
  // The message is answered as soon as it is whole (the client waits for the answer then); a
  // StartupMessage of any protocol version gets the ErrorResponse, as the server answers one it
  // does not support.
  if (received.length < length) return final ? answer(undefined) : NEED_MORE;
  return answer(errorResponse(failure));
}

/** An ErrorResponse: severity FATAL, the kind's SQLSTATE, the failure's text and hint. */
export function errorResponse(failure: RouteFailure): Buffer {
  const fields: Array<[string, string]> = [
    ['S', 'FATAL'],
    ['V', 'FATAL'],
    ['C', SQLSTATE[failure.kind]],
    ['M', failure.text],
  ];
  if (failure.hint) fields.push(['H', failure.hint]);
  const body = Buffer.concat([...fields.map(([type, value]) => Buffer.from(`${type}${value}\0`, 'utf8')), Buffer.from([0])]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeUInt32BE(4 + body.length, 1);
  return Buffer.concat([header, body]);
}
