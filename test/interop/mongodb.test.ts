import t, { type Test } from 'tap';
import { MongoClient, type MongoClientOptions } from 'mongodb';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { localProxyTo } from '../helpers/clients.js';
import { startMongoStandIn } from '../helpers/mongo-standin.js';
import { prng } from '../helpers/prng.js';

/**
 * The official `mongodb` driver through the local proxy (ALPN gate-mongodb, and gate-mongodb-ping)
 * and the proxy. Debian has no MongoDB server, so the upstream is a stand-in that speaks the
 * wire protocol's handshake (OP_QUERY isMaster / OP_MSG hello) and a few commands
 * (test/helpers/mongo-standin.ts).
 *
 * What this proves: the driver's TLS to the proxy with the right ALPN, routing on the shared and
 * separate ports, TLS terminated at the proxy, and the driver's byte stream carried intact both
 * ways (a random document inserted comes back equal; the stand-in parsed every message). What it
 * does not: MongoDB semantics (queries, authentication, SCRAM, sessions, cursors beyond one batch,
 * compression), which belong to a real server.
 */

const random = prng(0x6d0);
const standIn = await startMongoStandIn(t);
const upstreams = { mongodb: `${standIn.host}:${standIn.port}` };
const mux = await startGateProxy(t, { mode: 'multiplex', upstreams });
const separate = await startGateProxy(t, { mode: 'separate', upstreams });

/**
 * Connects (through a local proxy port, or with `tls` options straight to the proxy), pings,
 * inserts a random document and finds it again.
 */
async function roundTrip(t: Test, port: number, tls?: MongoClientOptions): Promise<void> {
  const host = tls ? 'localhost' : '127.0.0.1';
  const client = new MongoClient(`mongodb://${host}:${port}/?directConnection=true`, {
    serverSelectionTimeoutMS: 15_000,
    connectTimeoutMS: 15_000,
    // Only IPv4 loopback is listened on; `localhost` (the certificate's name) may resolve to ::1 first.
    family: 4,
    ...tls,
  });
  t.teardown(() => client.close(true));
  await client.connect();
  const ping = await client.db('admin').command({ ping: 1 });
  t.equal(ping.ok, 1, 'ping');
  const collection = `c${random.bytes(4).toString('hex')}`;
  const doc = { _id: random.bytes(6).toString('hex'), text: random.bytes(300).toString('base64'), n: random.int(1_000_000) };
  const inserted = await client.db('gate').collection<typeof doc>(collection).insertOne(doc);
  t.equal(inserted.insertedId, doc._id, 'insert acknowledged');
  const found = await client.db('gate').collection<typeof doc>(collection).findOne({ _id: doc._id });
  t.same(found, doc, 'the document came back equal');
  await client.close();
}

t.test('multiplexed port through the local proxy: gate-mongodb', async (t) => {
  const before = standIn.commands.length;
  await roundTrip(t, await localProxyTo(t, mux, 'multiplex', ['gate-mongodb']));
  const seen = standIn.commands.slice(before);
  t.ok(
    seen.some((c) => ['hello', 'isMaster', 'ismaster'].includes(c)),
    'the driver handshake reached the stand-in',
  );
  t.ok(seen.includes('ping') && seen.includes('insert') && seen.includes('find'), `commands seen: ${seen.join(', ')}`);
  t.notOk(
    seen.some((c) => c.startsWith('error')),
    'every message parsed',
  );
  t.ok(mux.route('multiplex', 'mongodb').connections >= 1, 'taken by the gate-mongodb route');
});

t.test("multiplexed port, no local proxy: the driver's own TLS with ALPNProtocols [gate-mongodb]", async (t) => {
  const before = mux.route('multiplex', 'mongodb').connections;
  await roundTrip(t, mux.port('multiplex'), { tls: true, ca: mux.ca, ALPNProtocols: ['gate-mongodb'] });
  t.ok(mux.route('multiplex', 'mongodb').connections > before, 'taken by the gate-mongodb route');
});

t.test('multiplexed port: gate-mongodb-ping (framed by the proxy and the local proxy)', async (t) => {
  await roundTrip(t, await localProxyTo(t, mux, 'multiplex', ['gate-mongodb-ping']));
  t.ok(mux.route('multiplex', 'mongodb-ping').connections >= 1);
});

t.test('separate mode: the MongoDB port and TLS routing on the web port', async (t) => {
  await roundTrip(t, await localProxyTo(t, separate, 'mongodb', ['gate-mongodb']));
  t.ok(separate.route('mongodb', 'mongodb').connections >= 1);
  await roundTrip(t, await localProxyTo(t, separate, 'web', ['gate-mongodb']));
  t.ok(separate.route('web', 'mongodb').connections >= 1);
});
