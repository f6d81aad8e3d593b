// The bench upstreams A and B in one process: TLS servers that say which one they are with their
// first byte ('A' or 'B'), then serve the workload in MODE:
//   bulk: wait for one byte from the client, send BULK_BYTES in large writes, end;
//   rate: send 1 KiB right after the handshake and end;
//   idle: keep the connection open and quiet.
// PLAIN=1 serves cleartext TCP instead (the upstreams behind a router that terminates the client's
// TLS: the tunnel workload). Prints {"portA":..,"portB":..} on stdout once both listen. Runs until SIGTERM.
import { createServer } from 'node:tls';
import { createServer as createPlainServer, type AddressInfo, type Socket } from 'node:net';
import { once } from 'node:events';

const mode = process.env.MODE ?? 'rate';
const bulkBytes = Number(process.env.BULK_BYTES ?? 1 << 30);
const key = process.env.TLS_KEY ?? '';
const cert = process.env.TLS_CERT ?? '';
const plain = process.env.PLAIN === '1';

const CHUNK = Buffer.alloc(1 << 20, 0x5a); // 1 MiB writes: OpenSSL cuts 16 KiB records from them
const RATE_BODY = Buffer.alloc(1024, 0x2e);

function sendBulk(socket: Socket): void {
  let left = bulkBytes;
  const pump = (): void => {
    while (left > 0) {
      const n = Math.min(left, CHUNK.length);
      left -= n;
      const ok = socket.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n));
      if (!ok) {
        socket.once('drain', pump);
        return;
      }
    }
    socket.end();
  };
  pump();
}

function serve(tag: string): (socket: Socket) => void {
  const tagByte = Buffer.from(tag);
  return (socket) => {
    socket.on('error', () => {});
    socket.setNoDelay(true);
    if (mode === 'rate') {
      socket.end(Buffer.concat([tagByte, RATE_BODY]));
      socket.resume();
      return;
    }
    socket.write(tagByte);
    if (mode === 'bulk') {
      socket.once('data', () => {
        socket.resume();
        sendBulk(socket);
      });
    } else socket.resume();
    socket.on('end', () => socket.end());
  };
}

async function listen(tag: string): Promise<number> {
  const server = plain ? createPlainServer(serve(tag)) : createServer({ key, cert }, serve(tag));
  server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 });
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

const portA = await listen('A');
const portB = await listen('B');
process.stdout.write(`${JSON.stringify({ portA, portB })}\n`);
process.on('SIGTERM', () => process.exit(0));
