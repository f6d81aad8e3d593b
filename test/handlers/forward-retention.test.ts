// What an idle forwarded connection keeps (lib/handlers/forward-handles.ts): once the relay runs,
// the dial that made it is garbage, and with it the peeked ClientHello or greeting, the Happy
// Eyeballs attempts and the dial deadline's timer and closures. When the relay's close callback
// held the dial, every idle connection kept ~1 KiB more (docs/benchmarks-archive.md, "Idle memory per
// connection"). Counted in a heap snapshot of this process (V8 collects garbage before taking
// one) while the connections are open and idle.
import t from 'tap';
import { getHeapSnapshot } from 'node:v8';
import { forward } from '../../lib/handlers/builders.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { closeServer, readUntil, tcpClient, trackedServer, until } from '../helpers/net.js';
import { TRANSPORT_OPTIONS } from '../helpers/transports.js';

const CONNECTIONS = 20;

/** Objects per constructor name in a heap snapshot of this process, for `names`. */
async function liveObjects(names: string[]): Promise<Record<string, number>> {
  let json = '';
  for await (const chunk of getHeapSnapshot()) json += String(chunk);
  const snapshot = JSON.parse(json) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const objectType = snapshot.snapshot.meta.node_types[0].indexOf('object');
  const counts: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    if (snapshot.nodes[i + typeAt] !== objectType) continue;
    const name = snapshot.strings[snapshot.nodes[i + nameAt]!]!;
    if (name in counts) counts[name]!++;
  }
  return counts;
}

t.test('an idle relayed connection on bare handles keeps its relay, not its dial', async (t) => {
  const upstream = await trackedServer((s) => s.pipe(s)); // echo
  const mux = new Multiplexer({
    ...TRANSPORT_OPTIONS.handles,
    routes: [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: upstream.port }) }],
  });
  const { port } = await mux.listen({ port: 0 });
  const clients = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const client = await tcpClient(port);
    client.write(`SSH-2.0-idle-${i}\r\n`);
    // Echoed back: the dial is done and the relay carries the connection.
    await readUntil(client, (text) => text.includes(`SSH-2.0-idle-${i}\r\n`));
    clients.push(client);
  }
  const live = await liveObjects(['HandleRelay', 'HandleDial', 'ForwardDial', 'Connection']);
  t.ok(live.HandleRelay! >= CONNECTIONS, `the snapshot sees the ${CONNECTIONS} relays (${live.HandleRelay})`);
  t.ok(live.Connection! >= CONNECTIONS, `and their connections (${live.Connection})`);
  t.equal(live.HandleDial, 0, 'no dial outlives the connect that ended it');
  t.equal(live.ForwardDial, 0, 'nor the connection part that held it');
  for (const client of clients) client.destroy();
  await until(() => mux.openConnections === 0, 'the connections to finish');
  await mux.close({ graceMs: 50 });
  await closeServer(upstream.server);
});
