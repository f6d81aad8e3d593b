// A host-name upstream with several addresses (lib/transport/address-order.ts, lib/handlers/forward-handles.ts):
// every address is tried, on every transport, so an address the upstream does not listen on
// (localhost's ::1 when the server binds 127.0.0.1 only, as on a Debian /etc/hosts) does not fail
// the dial. The names are resolved by the forward handler's `lookup` option, as net.connect's.
import t from 'tap';
import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { ErrorCodes } from '../../lib/errors.js';
import { forward } from '../../lib/handlers/builders.js';
import { dialOrder } from '../../lib/transport/address-order.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { closeServer, liveHandles, readUntil, refusedPort, tcpClient, trackedServer, until } from '../helpers/net.js';
import { availableTransports, TRANSPORT_LABEL, TRANSPORT_OPTIONS } from '../helpers/transports.js';

const v4 = (address: string): LookupAddress => ({ address, family: 4 });
const v6 = (address: string): LookupAddress => ({ address, family: 6 });

t.test('dialOrder: the first family first, then alternating, each in the resolver order, no duplicates', async (t) => {
  t.same(dialOrder([]), []);
  t.same(dialOrder([v4('127.0.0.1')]), [{ address: '127.0.0.1', family: 4 }]);
  t.same(
    dialOrder([v6('::1'), v6('::2'), v6('::3'), v4('127.0.0.1'), v4('127.0.0.2')]).map((a) => a.address),
    ['::1', '127.0.0.1', '::2', '127.0.0.2', '::3'],
  );
  t.same(
    dialOrder([v4('10.0.0.1'), v6('::1'), v4('10.0.0.2')]).map((a) => a.address),
    ['10.0.0.1', '::1', '10.0.0.2'],
  );
  t.same(
    dialOrder([v4('10.0.0.1'), v4('10.0.0.1'), v6('::1'), v6('::1')]).map((a) => a.address),
    ['10.0.0.1', '::1'],
    'duplicates dropped',
  );
});

/** A resolver that answers every name with `addresses`, and records how it was asked. */
function fakeLookup(addresses: LookupAddress[], asked: Array<{ name: string; all: boolean }>): LookupFunction {
  return ((
    name: string,
    options: { all?: boolean },
    callback: (err: Error | null, found: LookupAddress[] | string, family?: number) => void,
  ) => {
    asked.push({ name, all: options.all === true });
    if (options.all) setImmediate(() => callback(null, addresses));
    else setImmediate(() => callback(null, addresses[0]!.address, addresses[0]!.family));
  }) as LookupFunction;
}

for (const name of availableTransports(t)) {
  t.test(`a name whose first address refuses is carried by its next one, on ${TRANSPORT_LABEL[name]}`, async (t) => {
    const before = liveHandles();
    const upstream = await trackedServer((s) => s.resume().end('reached over IPv4\n'));
    const asked: Array<{ name: string; all: boolean }> = [];
    // ::1 first, as a resolver with "::1 localhost" in /etc/hosts answers; nothing listens there.
    const lookup = fakeLookup([v6('::1'), v4('127.0.0.1')], asked);
    const mux = new Multiplexer({
      ...TRANSPORT_OPTIONS[name],
      routes: [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: 'upstream.test', port: upstream.port }, { lookup }) }],
    });
    const { port } = await mux.listen({ port: 0 });
    for (let i = 0; i < 3; i++) {
      const client = await tcpClient(port);
      client.write('SSH-2.0-eyeballs\r\n');
      t.equal(await readUntil(client, () => false), 'reached over IPv4\n', `connection ${i + 1} reached the upstream`);
    }
    t.ok(asked.length >= 3 && asked.every((a) => a.name === 'upstream.test' && a.all), 'the name was looked up for all its addresses');
    t.same(mux.stats().failures, {}, 'the refused ::1 attempt is no failure of the connection');
    await until(() => mux.openConnections === 0, 'the connections to finish');
    await mux.close({ graceMs: 50 });
    await closeServer(upstream.server);
    await until(() => liveHandles().sockets <= before.sockets && liveHandles().servers <= before.servers, 'sockets and listeners to close');
    t.same(liveHandles(), before, 'no socket, timer or listener left (the abandoned attempt included)');
  });

  t.test(`a name whose every address refuses is GATE_ERR_DIAL_REFUSED, on ${TRANSPORT_LABEL[name]}`, async (t) => {
    const before = liveHandles();
    const deadPort = await refusedPort();
    const mux = new Multiplexer({
      ...TRANSPORT_OPTIONS[name],
      routes: [
        {
          name: 'ssh',
          match: { protocol: 'ssh' },
          handler: forward(
            { host: 'nowhere.test', port: deadPort },
            { lookup: fakeLookup([v6('::1'), v4('127.0.0.1'), v4('127.0.0.2')], []) },
          ),
        },
      ],
    });
    const { port } = await mux.listen({ port: 0 });
    const client = await tcpClient(port);
    client.on('error', () => {});
    client.write('SSH-2.0-eyeballs\r\n');
    // Told why in its own protocol (an SSH disconnect naming the code), then closed.
    const said = await readUntil(client, () => false);
    t.match(said, /^SSH-2\.0-gate-mux\r\n/, 'the SSH identification, then the disconnect');
    t.match(said, 'gate: the upstream refused the connection (GATE_ERR_DIAL_REFUSED)');
    await until(() => mux.stats().failures[ErrorCodes.DIAL_REFUSED] === 1, 'GATE_ERR_DIAL_REFUSED');
    t.same(Object.keys(mux.stats().failures), [ErrorCodes.DIAL_REFUSED], 'that failure only, once for the connection');
    await mux.close({ graceMs: 50 });
    await until(() => liveHandles().sockets <= before.sockets && liveHandles().servers <= before.servers, 'sockets and listeners to close');
    t.same(liveHandles(), before, 'no socket, timer or listener left');
  });
}
