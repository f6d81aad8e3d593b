import { answer, type RefusalAnswer } from './step.js';
import type { FailureKind, RouteFailure } from './failure.js';

/**
 * MySQL / MariaDB: the server speaks first, so the failure is an ERR_Packet sent at once in place
 * of the initial handshake (MySQL client/server protocol, "ERR_Packet"; what a server at its
 * connection limit or refusing a host sends). Before the handshake no capabilities are agreed, so
 * the packet has no SQL state marker: clients print `ERROR <number> (HY000): <message>`.
 */

/**
 * Error numbers per kind, from the server's range: 1152 ER_ABORTING_CONNECTION for a route that
 * cannot be made, 1130 ER_HOST_NOT_PRIVILEGED for a refused target, 1040 ER_CON_COUNT_ERROR ("Too
 * many connections") for overload. Not 2003 as MySQL Router sends: 2000-2999 are the client
 * library's own numbers, and MariaDB's client reads a server packet carrying one as malformed
 * (`ERROR 2027`).
 */
const ERROR_NUMBER: Record<FailureKind, number> = {
  unavailable: 1152,
  timeout: 1152,
  failed: 1152,
  denied: 1130,
  busy: 1040,
};

export function mysqlRefusal(_received: Buffer, failure: RouteFailure): RefusalAnswer {
  return answer(errPacket(failure));
}

/** An ERR_Packet with sequence id 0 (the first packet of the connection). */
export function errPacket(failure: RouteFailure): Buffer {
  const message = Buffer.from(failure.text, 'utf8');
  const payload = Buffer.alloc(3 + message.length);
  payload[0] = 0xff;
  payload.writeUInt16LE(ERROR_NUMBER[failure.kind], 1);
  message.copy(payload, 3);
  const header = Buffer.alloc(4);
  header.writeUIntLE(payload.length, 0, 3);
  header[3] = 0; // sequence id
  return Buffer.concat([header, payload]);
}
