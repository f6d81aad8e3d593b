import { createServer, type AddressInfo, type Socket } from 'node:net';
import { BSON } from 'mongodb';
import type { Teardownable } from './daemon.js';

/**
 * A stand-in for a MongoDB server (Debian ships none): it speaks just enough of the wire protocol
 * (https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/) for the official driver
 * to connect and run a few commands. OP_QUERY `isMaster` (the driver's first handshake) is
 * answered with OP_REPLY, OP_MSG commands with OP_MSG: hello/isMaster, ping, insert (kept in
 * memory), find (returns everything inserted into that collection, filters ignored), anything
 * else `{ok: 1}`. It proves bytes flow both ways intact and in order; it is not MongoDB.
 */

const OP_REPLY = 1;
const OP_QUERY = 2004;
const OP_MSG = 2013;
const HEADER = 16;

export interface MongoStandIn {
  host: string;
  port: number;
  /** Command names received, in order (`isMaster`, `hello`, `ping`, `insert`, `find`, ...). */
  commands: string[];
  /** Connections accepted. */
  connections(): number;
}

type Doc = Record<string, unknown>;

function helloReply(): Doc {
  return {
    helloOk: true,
    ismaster: true,
    isWritablePrimary: true,
    maxBsonObjectSize: 16 * 1024 * 1024,
    maxMessageSizeBytes: 48_000_000,
    maxWriteBatchSize: 100_000,
    localTime: new Date(),
    connectionId: 1,
    // MongoDB 7.0's wire version; the driver needs at least 9.
    minWireVersion: 0,
    maxWireVersion: 21,
    readOnly: false,
    ok: 1,
  };
}

function cstringEnd(buf: Buffer, offset: number): number {
  const end = buf.indexOf(0, offset);
  if (end < 0) throw new Error('unterminated cstring');
  return end;
}

function message(requestId: number, responseTo: number, opCode: number, body: Buffer): Buffer {
  const header = Buffer.alloc(HEADER);
  header.writeInt32LE(HEADER + body.length, 0);
  header.writeInt32LE(requestId, 4);
  header.writeInt32LE(responseTo, 8);
  header.writeInt32LE(opCode, 12);
  return Buffer.concat([header, body]);
}

export async function startMongoStandIn(t: Teardownable): Promise<MongoStandIn> {
  const commands: string[] = [];
  const collections = new Map<string, Doc[]>();
  let accepted = 0;
  let nextId = 1;
  const sockets = new Set<Socket>();

  const answer = (command: Doc, extraDocs: Doc[]): Doc => {
    const name = Object.keys(command)[0] ?? '';
    commands.push(name);
    const db = typeof command.$db === 'string' ? command.$db : 'admin';
    switch (name) {
      case 'hello':
      case 'isMaster':
      case 'ismaster':
        return helloReply();
      case 'insert': {
        const ns = `${db}.${String(command.insert)}`;
        const docs = [...((command.documents as Doc[] | undefined) ?? []), ...extraDocs];
        collections.set(ns, [...(collections.get(ns) ?? []), ...docs]);
        return { n: docs.length, ok: 1 };
      }
      case 'find': {
        const ns = `${db}.${String(command.find)}`;
        return { cursor: { firstBatch: collections.get(ns) ?? [], id: BSON.Long.fromNumber(0), ns }, ok: 1 };
      }
      default:
        return { ok: 1 };
    }
  };

  const handle = (socket: Socket, msg: Buffer): void => {
    const requestId = msg.readInt32LE(4);
    const opCode = msg.readInt32LE(12);
    if (opCode === OP_QUERY) {
      // flags, fullCollectionName, numberToSkip, numberToReturn, query document.
      const nameEnd = cstringEnd(msg, HEADER + 4);
      const query = BSON.deserialize(msg.subarray(nameEnd + 1 + 8)) as Doc;
      const reply = BSON.serialize(answer(query, []));
      const body = Buffer.alloc(20);
      body.writeInt32LE(0, 0); // responseFlags
      body.writeBigInt64LE(0n, 4); // cursorID
      body.writeInt32LE(0, 12); // startingFrom
      body.writeInt32LE(1, 16); // numberReturned
      socket.write(message(nextId++, requestId, OP_REPLY, Buffer.concat([body, reply])));
      return;
    }
    if (opCode !== OP_MSG) throw new Error(`opCode ${opCode} not supported by the stand-in`);
    const flags = msg.readUInt32LE(HEADER);
    const end = flags & 1 ? msg.length - 4 : msg.length; // checksumPresent
    let offset = HEADER + 4;
    let body: Doc | undefined;
    const sequence: Doc[] = [];
    while (offset < end) {
      const kind = msg[offset++];
      if (kind === 0) {
        const size = msg.readInt32LE(offset);
        body = BSON.deserialize(msg.subarray(offset, offset + size)) as Doc;
        offset += size;
      } else {
        // Kind 1: document sequence (size, identifier, documents).
        const size = msg.readInt32LE(offset);
        const stop = offset + size;
        let at = cstringEnd(msg, offset + 4) + 1;
        while (at < stop) {
          const docSize = msg.readInt32LE(at);
          sequence.push(BSON.deserialize(msg.subarray(at, at + docSize)) as Doc);
          at += docSize;
        }
        offset = stop;
      }
    }
    if (!body) throw new Error('OP_MSG without a body section');
    const reply = BSON.serialize(answer(body, sequence));
    const head = Buffer.alloc(5); // flagBits 0, section kind 0
    socket.write(message(nextId++, requestId, OP_MSG, Buffer.concat([head, reply])));
  };

  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= pending.readInt32LE(0)) {
        const size = pending.readInt32LE(0);
        const msg = pending.subarray(0, size);
        pending = pending.subarray(size);
        try {
          handle(socket, msg);
        } catch (err) {
          commands.push(`error: ${(err as Error).message}`);
          socket.destroy();
          return;
        }
      }
    });
  });
  const host = '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(0, host, () => resolve()));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return { host, port: (server.address() as AddressInfo).port, commands, connections: () => accepted };
}
