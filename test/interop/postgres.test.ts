import t from 'tap';
import { startGateProxy, type RunningGateProxy } from '../helpers/gate-proxy.js';
import { describeResult, localProxyTo, runClient } from '../helpers/clients.js';
import { requirePeer } from '../helpers/peers.js';
import { startPostgres, type RunningPostgres } from '../helpers/postgres.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

/**
 * psql (libpq 15: SSLRequest, no ALPN) against a real PostgreSQL through the proxy: straight at
 * the multiplexed port with TLS (the multiplexer answers the SSLRequest 'S', terminates TLS with
 * its certificate and forwards the cleartext protocol), through the local proxy (ALPN
 * `gate-postgres`), on the separate Postgres port with and without TLS, and through a real
 * corporate proxy taken from HTTPS_PROXY, or bypassing it with NO_PROXY.
 */

const psql = requirePeer(t, 'psql', 'postgresql-client');
const pg = psql ? await startPostgres(t) : undefined;

/** The query every case runs: its answer names the server's own port, so it came from this cluster. */
const QUERY = "select 'gate-' || 6*7 || ' ' || current_setting('port')";

async function query(conninfo: string): Promise<string> {
  const result = await runClient(psql!, ['-X', '-At', '-v', 'ON_ERROR_STOP=1', '-c', QUERY, conninfo], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PGCONNECT_TIMEOUT: '15', LANG: 'C' },
  });
  if (result.code !== 0) throw new Error(`psql ${conninfo}: ${describeResult(result)}`);
  return result.stdout.toString().trim();
}

/** TLS to the proxy, its certificate verified against its development CA for the name localhost. */
function tlsTo(gate: RunningGateProxy, port: number): string {
  return `host=localhost hostaddr=127.0.0.1 port=${port} sslmode=verify-full sslrootcert=${gate.caFile} user=postgres dbname=postgres`;
}

function plainTo(port: number): string {
  return `host=127.0.0.1 port=${port} sslmode=disable user=postgres dbname=postgres`;
}

if (pg) {
  const server: RunningPostgres = pg;
  const expected = `gate-42 ${server.port}`;
  const upstreams = { postgres: `${server.host}:${server.port}` };
  const mux = await startGateProxy(t, { mode: 'multiplex', upstreams });
  const separate = await startGateProxy(t, { mode: 'separate', upstreams });

  t.test('multiplexed port: psql sslmode=verify-full (SSLRequest, then TLS the proxy terminates)', async (t) => {
    const before = mux.route('multiplex', 'postgres-startup').connections;
    t.equal(await query(tlsTo(mux, mux.port('multiplex'))), expected);
    t.equal(mux.route('multiplex', 'postgres-startup').connections, before + 1, 'taken by the SSLRequest route');
    t.ok((mux.stats('multiplex').byProtocol.postgres ?? 0) >= 1, 'detected as Postgres');
  });

  t.test('multiplexed port: plaintext psql (sslmode=disable) is forwarded as it is', async (t) => {
    t.equal(await query(plainTo(mux.port('multiplex'))), expected);
  });

  t.test('multiplexed port through the local proxy (ALPN gate-postgres)', async (t) => {
    const local = await localProxyTo(t, mux, 'multiplex', ['gate-postgres']);
    const before = mux.route('multiplex', 'postgres').connections;
    t.equal(await query(plainTo(local)), expected);
    t.equal(mux.route('multiplex', 'postgres').connections, before + 1, 'taken by the ALPN route');
  });

  t.test('separate mode: the Postgres port with TLS and without, and TLS routing on the web port', async (t) => {
    t.equal(await query(tlsTo(separate, separate.port('postgres'))), expected, 'SSLRequest on the Postgres port');
    t.equal(await query(plainTo(separate.port('postgres'))), expected, 'plaintext on the Postgres port');
    t.equal(separate.route('postgres', 'postgres').connections, 2);
    const local = await localProxyTo(t, separate, 'web', ['gate-postgres']);
    t.equal(await query(plainTo(local)), expected, 'ALPN gate-postgres on the web port');
    t.equal(separate.route('web', 'postgres').connections, 1);
  });

  t.test('through a corporate proxy (tinyproxy) from HTTPS_PROXY, and NO_PROXY bypassing it', async (t) => {
    const proxy = await startTinyproxy(t);
    if (!proxy) return;
    // Loopback targets are always dialled directly (docs/client.md), whatever HTTPS_PROXY says. So the
    // local proxy dials the multiplexer as 0.0.0.0:<port>: not a loopback name to the resolver,
    // while Linux delivers a connection to 0.0.0.0 to this host's loopback (where the multiplexer
    // listens on 127.0.0.1). tinyproxy (on 127.0.0.2) makes that connection itself.
    const target = `0.0.0.0:${mux.port('multiplex')}`;
    const connects = (): number => proxy.output().split(`CONNECT 0.0.0.0:${mux.port('multiplex')}`).length - 1;
    const viaProxy = await localProxyTo(t, mux, 'multiplex', ['gate-postgres'], { target, env: { HTTPS_PROXY: proxy.url } });
    t.equal(await query(plainTo(viaProxy)), expected, 'through tinyproxy');
    t.equal(connects(), 1, 'tinyproxy carried the tunnel');
    const bypass = await localProxyTo(t, mux, 'multiplex', ['gate-postgres'], {
      target,
      env: { HTTPS_PROXY: proxy.url, NO_PROXY: 'db.internal,0.0.0.0' },
    });
    t.equal(await query(plainTo(bypass)), expected, 'direct under NO_PROXY');
    t.equal(connects(), 1, 'tinyproxy saw no new CONNECT');
  });
}
