// A dial that completed while the event loop was busy is not a dial timeout (lib/handlers/
// dial-deadline.ts). The upstream function schedules a busy wait that starts right after the
// dial and its timer are set up (a nextTick runs before the loop goes on) and lasts well past the
// dial timeout: the loopback connect completes in the kernel meanwhile, and when the loop goes on
// the timer is due before the connect is polled. The connection must carry its bytes, on every
// transport (a dial that never completes still times out: test/hardening/faults.test.ts, stall-dial).
import t from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import { forward } from '../../lib/handlers/builders.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { availableTransports, TRANSPORT_LABEL, TRANSPORT_OPTIONS } from '../helpers/transports.js';
import { closeServer, echoOnce, startTaggedTcpServer, tcpClient, until } from '../helpers/net.js';

const DIAL_TIMEOUT_MS = 50;
const BUSY_MS = 300;

function busy(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // the event loop is held, as a long turn holds it
  }
}

for (const name of availableTransports(t)) {
  t.test(`${TRANSPORT_LABEL[name]}: a connect completed during a busy turn is not a dial timeout`, async (t) => {
    const upstream = await startTaggedTcpServer('up');
    t.teardown(() => closeServer(upstream.server));
    const mux = new Multiplexer({
      ...TRANSPORT_OPTIONS[name],
      routes: [
        {
          name: 'ssh',
          match: { protocol: 'ssh' },
          handler: forward(
            () => {
              process.nextTick(busy, BUSY_MS);
              return { host: '127.0.0.1', port: upstream.port };
            },
            { dialTimeoutMs: DIAL_TIMEOUT_MS },
          ),
        },
      ],
    });
    t.teardown(() => mux.close({ graceMs: 0 }));
    const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
    const client = await tcpClient(port);
    const reply = await echoOnce(client, 'SSH-2.0-busy\r\n');
    t.match(reply, /^up\n/, 'the upstream answered through the router');
    client.destroy();
    await until(() => mux.stats().open === 0, 'the connection closed');
    t.equal(mux.stats().failures[ErrorCodes.DIAL_TIMEOUT] ?? 0, 0, 'no GATE_ERR_DIAL_TIMEOUT');
  });
}
