// A connection's explicit state: detecting → routed → closing → closed, on real loopback sockets.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { silentLogger } from '../../lib/log.js';
import { Connection } from '../../lib/mux/connection.js';
import { SocketEnd } from '../../lib/transport/client-end.js';

/** `n` accepted server-side sockets on 127.0.0.1, with their clients; all destroyed at teardown. */
async function socketPairs(t: Test, n: number): Promise<{ accepted: Socket; client: Socket }[]> {
  const accepted: Socket[] = [];
  const server = createServer((s) => accepted.push(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  const clients: Socket[] = [];
  for (let i = 0; i < n; i++) {
    const c = connect(port, '127.0.0.1');
    await once(c, 'connect');
    clients.push(c);
  }
  while (accepted.length < n) await new Promise((r) => setImmediate(r));
  t.teardown(() => {
    for (const s of [...accepted, ...clients]) s.destroy();
    server.close();
  });
  return clients.map((client, i) => ({ accepted: accepted[i]!, client }));
}

function connectionOn(socket: Socket, finished: Connection[]): Connection {
  return new Connection(1, new SocketEnd(socket), socket, silentLogger(), (c) => finished.push(c));
}

t.test('routed, then failed: closing at once, closed when every part has closed, finished once', async (t) => {
  const [pair, upstream] = await socketPairs(t, 2);
  const finished: Connection[] = [];
  const conn = connectionOn(pair!.accepted, finished);
  t.equal(conn.state, 'detecting');
  t.notOk(conn.routed);
  conn.markRouted('web');
  t.equal(conn.state, 'routed');
  t.ok(conn.routed);
  t.equal(conn.info.route, 'web');
  conn.adopt(upstream!.client, 'upstream');
  conn.fail(new GateError(ErrorCodes.SHUTDOWN, 'grace over'));
  t.equal(conn.state, 'closing', 'closing while its sockets close');
  t.same(finished, [], 'not finished before every part has closed');
  await once(upstream!.client, 'close');
  while (conn.state !== 'closed') await new Promise((r) => setImmediate(r));
  t.same(finished, [conn], 'finished exactly once');
  t.equal(conn.error?.code, ErrorCodes.SHUTDOWN, 'the first failure is the one recorded');
  t.ok(conn.routed, 'still counted as routed after it closed');
  const late = upstream!.accepted;
  conn.adopt(late);
  t.ok(late.destroyed, 'a stream adopted after the end is destroyed, not kept');
  t.same(finished, [conn]);
});

t.test('a client that leaves while detecting: closed, never routed, the close recorded', async (t) => {
  const [pair] = await socketPairs(t, 1);
  const finished: Connection[] = [];
  const conn = connectionOn(pair!.accepted, finished);
  pair!.accepted.resume(); // detection reads the client: its FIN is seen
  pair!.client.destroy();
  while (conn.state !== 'closed') await new Promise((r) => setImmediate(r));
  t.same(finished, [conn]);
  t.notOk(conn.routed);
  t.equal(conn.info.route, '');
});
