import { serialize } from 'bson';
import { answer, NEED_MORE, REFUSAL_READ_LIMIT, type RefusalAnswer } from './step.js';
import type { FailureKind, RouteFailure } from './failure.js';

/**
 * MongoDB: a driver speaks first, with its handshake (`hello`, or legacy `isMaster`) as an OP_MSG
 * or, from drivers that have not yet learnt the server's wire version, an OP_QUERY on
 * `admin.$cmd` (MongoDB Wire Protocol). The failure is the reply to that message, a command
 * reply `{ ok: 0, errmsg, code, codeName }` addressed to its requestID, which drivers raise as a
 * server error with `errmsg` as the message (the Node driver: MongoServerError). Only the header
 * of the client's message is read (its length, id and opcode); its body is never looked at.
 */

const OP_REPLY = 1;
const OP_QUERY = 2004;
const OP_MSG = 2013;
const HEADER = 16;

/** MongoDB error codes (src/mongo/base/error_codes.yml) per kind. */
const CODE: Record<FailureKind, [number, string]> = {
  unavailable: [6, 'HostUnreachable'],
  failed: [6, 'HostUnreachable'],
  busy: [6, 'HostUnreachable'],
  timeout: [89, 'NetworkTimeout'],
  denied: [13, 'Unauthorized'],
};

export function mongodbRefusal(received: Buffer, failure: RouteFailure, final: boolean): RefusalAnswer {
  if (received.length < HEADER) return final ? answer(undefined) : NEED_MORE;
  const length = received.readInt32LE(0);
  const opCode = received.readInt32LE(12);
  // Not a handshake a driver sends: close without a word.
  if (length < HEADER || length > REFUSAL_READ_LIMIT || (opCode !== OP_MSG && opCode !== OP_QUERY)) return answer(undefined);
  if (received.length < length) return final ? answer(undefined) : NEED_MORE;
  return answer(errorReply(failure, received.readInt32LE(4), opCode === OP_MSG));
}

/** The error reply to request `requestId`: an OP_MSG to an OP_MSG, an OP_REPLY to an OP_QUERY. */
export function errorReply(failure: RouteFailure, requestId: number, opMsg: boolean): Buffer {
  const [code, codeName] = CODE[failure.kind];
  const document = Buffer.from(serialize({ ok: 0, errmsg: failure.text, code, codeName }));
  // OP_MSG: flagBits, then one kind-0 section (the body). OP_REPLY: responseFlags, cursorID,
  // startingFrom, numberReturned, then the document.
  const prefix = opMsg ? Buffer.from([0, 0, 0, 0, 0]) : Buffer.alloc(20);
  if (!opMsg) prefix.writeInt32LE(1, 16);
  const header = Buffer.alloc(HEADER);
  header.writeInt32LE(HEADER + prefix.length + document.length, 0);
  header.writeInt32LE(0, 4); // requestID of the reply
  header.writeInt32LE(requestId, 8); // responseTo
  header.writeInt32LE(opMsg ? OP_MSG : OP_REPLY, 12);
  return Buffer.concat([header, prefix, document]);
}
