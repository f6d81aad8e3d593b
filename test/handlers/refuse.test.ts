// The failure path's answer on a real socket (handlers/refuse.ts): what it waits for is bounded in
// bytes and in time, it closes after answering even when the client does not, and the connection
// is still counted with the route's code.
import t from 'tap';
import { once } from 'node:events';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { refuseClient, refusalFor } from '../../lib/handlers/refuse.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { tcpClient, until } from '../helpers/net.js';

const LIMITS = { readMs: 300, lingerMs: 300 };

/** A plaintext listener whose every route fails with GATE_ERR_AGENT_OFFLINE and answers in the connection's protocol. */
async function refusing(t: { teardown(fn: () => unknown): unknown }): Promise<{ port: number; mux: Multiplexer }> {
  const mux = new Multiplexer({
    routes: [
      {
        name: 'refused',
        match: { protocol: ['http1', 'postgres', 'ssh'] },
        handler: {
          kind: 'custom',
          handle: (socket, info) => {
            const protocol = refusalFor(undefined, socket, info);
            if (!protocol) throw new Error(`no protocol for ${info.protocol}`);
            refuseClient(socket, new GateError(ErrorCodes.AGENT_OFFLINE, 'agent db-1 is offline'), protocol, undefined, 'db-1', LIMITS);
          },
        },
      },
    ],
  });
  const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => mux.close({ graceMs: 0 }));
  return { port, mux };
}

/** Everything the server sends until its FIN (or a close). */
async function received(socket: import('node:net').Socket): Promise<string> {
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  socket.on('error', () => {});
  await Promise.race([once(socket, 'end'), once(socket, 'close')]);
  return text;
}

t.test('an answer as soon as the first message is in; the close follows even if the client stays', async (t) => {
  const { port, mux } = await refusing(t);
  // Half-open allowed: the client does not answer the server's FIN with its own.
  const client = await tcpClient(port, { allowHalfOpen: true });
  const got = received(client);
  client.write('GET / HTTP/1.1\r\nHost: a\r\n\r\n'); // and never closes
  const text = await got;
  t.match(text, /^HTTP\/1\.1 502 Bad Gateway\r\n/);
  t.match(text, 'gate: agent "db-1" is offline (GATE_ERR_AGENT_OFFLINE)');
  // The connection ends (and is counted) though the client never closed its side.
  await until(() => mux.stats().failures[ErrorCodes.AGENT_OFFLINE] === 1, 'the failure counted with its code');
  t.equal(mux.stats().open, 0, 'nothing left open on the proxy');
  client.destroy();
});

t.test('a client that never finishes its first message gets no answer, and the close', async (t) => {
  const { port, mux } = await refusing(t);
  const client = await tcpClient(port);
  const got = received(client);
  const startup = Buffer.alloc(8);
  startup.writeUInt32BE(100, 0); // a 100-byte startup message, of which only the header comes
  startup.writeUInt32BE(196608, 4);
  client.write(startup);
  t.equal(await got, '', 'nothing said to a message never finished');
  await until(() => mux.stats().failures[ErrorCodes.AGENT_OFFLINE] === 1, 'the failure counted with its code');
});

t.test('at most REFUSAL_READ_LIMIT bytes are read: a head that never ends is answered at the bound', async (t) => {
  const { port } = await refusing(t);
  const client = await tcpClient(port);
  const got = received(client);
  client.write(`GET / HTTP/1.1\r\nX-Long: ${'a'.repeat(40_000)}`);
  t.match(await got, /^HTTP\/1\.1 502 Bad Gateway\r\n/, 'answered once the bound is reached');
});

t.test('a client that ends right after its message still reads the answer; the code is kept', async (t) => {
  const { port, mux } = await refusing(t);
  const client = await tcpClient(port, { allowHalfOpen: true });
  const got = received(client);
  client.end('SSH-2.0-OpenSSH_9.2\r\n');
  t.match(await got, /^SSH-2\.0-gate-mux\r\n/);
  await until(() => mux.stats().failures[ErrorCodes.AGENT_OFFLINE] === 1, 'the failure counted with its code');
});
