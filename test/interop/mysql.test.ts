import t from 'tap';
import { mysqlVersionAlpn } from '../../lib/wire/names.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { describeResult, localProxyTo, runClient } from '../helpers/clients.js';
import { startMariadb } from '../helpers/mariadb.js';
import { requirePeer } from '../helpers/peers.js';

/**
 * The MariaDB client against a real MariaDB through the proxy. MySQL's server speaks first (it
 * sends the handshake; the client sends nothing until then), so a plaintext client can only be
 * routed on a port of its own (separate mode's MySQL port, forwarded at once) or inside TLS with
 * ALPN gate-mysql through the local proxy. On the shared port a plaintext client is met with
 * silence until the detection deadline: the last case shows that, as the README says.
 */

const client = requirePeer(t, 'mariadb', 'mariadb-client');
const server = client ? await startMariadb(t) : undefined;

async function query(port: number, timeoutSeconds = 15): Promise<string> {
  const result = await runClient(client!, [
    '--no-defaults',
    '--protocol=TCP',
    '-h',
    '127.0.0.1',
    '-P',
    String(port),
    '-u',
    'root',
    `--connect-timeout=${timeoutSeconds}`,
    '-N',
    '-B',
    '-e',
    "SELECT CONCAT('gate-', 6*7, ' ', @@port)",
  ]);
  if (result.code !== 0) throw new Error(`mariadb: ${describeResult(result)}`);
  return result.stdout.toString().trim();
}

if (server) {
  const expected = `gate-42 ${server.port}`;
  const upstreams = { mysql: `${server.host}:${server.port}` };
  const mux = await startGateProxy(t, { mode: 'multiplex', upstreams, detectTimeout: '1s' });
  const separate = await startGateProxy(t, { mode: 'separate', upstreams });

  t.test('separate mode: the MySQL port forwards at once, the server speaks first', async (t) => {
    t.equal(await query(separate.port('mysql')), expected);
    t.equal(separate.route('mysql', 'mysql').connections, 1);
  });

  t.test('multiplexed port through the local proxy: gate-mysql, its -ping and versioned variants', async (t) => {
    t.equal(await query(await localProxyTo(t, mux, 'multiplex', ['gate-mysql'])), expected, 'gate-mysql');
    t.equal(mux.route('multiplex', 'mysql').connections, 1);
    t.equal(await query(await localProxyTo(t, mux, 'multiplex', ['gate-mysql-ping'])), expected, 'gate-mysql-ping');
    t.equal(mux.route('multiplex', 'mysql-ping').connections, 1);
    const versioned = mysqlVersionAlpn('8.0.36-gate');
    t.equal(await query(await localProxyTo(t, mux, 'multiplex', [versioned])), expected, versioned);
    t.equal(mux.route('multiplex', 'mysql-versioned').connections, 1);
  });

  t.test('separate mode: TLS routing on the web port (gate-mysql)', async (t) => {
    t.equal(await query(await localProxyTo(t, separate, 'web', ['gate-mysql'])), expected);
    t.equal(separate.route('web', 'mysql').connections, 1);
  });

  t.test('multiplexed port, plaintext client: nothing to route on, cut at the detection deadline', async (t) => {
    const before = mux.stats('multiplex').failures.GATE_ERR_DETECT_TIMEOUT ?? 0;
    await t.rejects(query(mux.port('multiplex'), 20), /exit 1.*(Lost connection|reading initial communication packet)/s);
    t.equal(mux.stats('multiplex').failures.GATE_ERR_DETECT_TIMEOUT, before + 1, 'the proxy gave up detecting');
    t.equal(mux.route('multiplex', 'mysql').connections, 1, 'never reached the MySQL route');
  });
}
