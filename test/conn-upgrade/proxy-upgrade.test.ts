// The connection upgrade on a real GateProxy with `proxy_protocol: on`, as behind an L4 balancer
// that speaks PROXY protocol in front of the HTTP hop: the upgraded stream is recorded with the
// client the PROXY header named (not the balancer's TCP address), X-Forwarded-For is trusted by
// that address, and /metrics counts upgrades, refusals by status, the bytes carried and the pings.
import t from 'tap';
import { ErrorCodes } from '../../lib/errors.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { clientFrame, closeCode, failureLogger, Opcode, rawUpgrade, readFrames } from '../helpers/conn-upgrade.js';
import { closeServer, startTaggedTcpServer, until } from '../helpers/net.js';
import { scrape } from '../helpers/prometheus.js';

const { logger, failures } = failureLogger();

const ssh = await startTaggedTcpServer('ssh-upstream');
t.teardown(() => closeServer(ssh.server));
const gate = await startGateProxy(t, {
  mode: 'multiplex',
  upstreams: { ssh: `127.0.0.1:${ssh.port}` },
  detectTimeout: '3s',
  logger,
  proxyService: {
    proxy_protocol: 'on',
    proxy_protocol_trusted_networks: ['127.0.0.0/8'],
    // An L7 balancer at 198.51.100.0/24 (as the PROXY header says) names the client in X-Forwarded-For.
    connection_upgrade_trusted_networks: ['198.51.100.0/24'],
    connection_upgrade_ping_interval: '200ms',
  },
  top: { diag_addr: '127.0.0.1:0' },
});
const port = gate.port('multiplex');
const diag = gate.proxy.diagAddress!.port;
const tls = { ca: gate.ca, servername: 'localhost' };
const proxyHeader = (source: string): string => `PROXY TCP4 ${source} 127.0.0.1 40000 ${port}\r\n`;

/**
 * An upgrade behind a PROXY header naming `source` (over TLS, or `cleartext` HTTP), one unknown
 * protocol inside: the address recorded for its failure.
 */
async function recordedAddress(source: string, headers: Record<string, string> = {}, cleartext = false): Promise<string | undefined> {
  const r = await rawUpgrade({ port, ...(cleartext ? {} : { tls }), proxyHeader: proxyHeader(source), headers });
  if (r.status !== 101) throw new Error(`upgrade answered ${r.status}: ${r.rest.toString()}`);
  const before = failures.length;
  r.socket.write(clientFrame(Opcode.binary, Buffer.from('NOT-A-PROTOCOL\r\n')));
  await closeCode(r.socket, r.rest);
  const failed = (): { remote?: string } | undefined => failures.slice(before).find((f) => f.code === ErrorCodes.UNKNOWN_PROTOCOL);
  await until(() => failed() !== undefined, 'the carried connection to fail', 5000);
  return failed()?.remote;
}

t.test('behind PROXY protocol, an upgraded stream is recorded with the client the header named', async (t) => {
  t.equal(await recordedAddress('203.0.113.7'), '203.0.113.7', 'not the balancer TCP address (127.0.0.1)');
  t.equal(
    await recordedAddress('203.0.113.7', { 'X-Forwarded-For': '192.0.2.1' }),
    '203.0.113.7',
    'X-Forwarded-For from a source not trusted for the upgrade is ignored',
  );
  // A balancer that talks plain HTTP to the proxy (a private network): the same upgrade, no outer TLS.
  t.equal(await recordedAddress('203.0.113.9', {}, true), '203.0.113.9', 'in cleartext HTTP too');
});

t.test('X-Forwarded-For is trusted by the address the PROXY header named', async (t) => {
  t.equal(await recordedAddress('198.51.100.4', { 'X-Forwarded-For': '192.0.2.33' }), '192.0.2.33');
  const two = await rawUpgrade({
    port,
    tls,
    proxyHeader: proxyHeader('198.51.100.4'),
    headers: { 'X-Forwarded-For': '192.0.2.1, 192.0.2.2' },
  });
  t.equal(two.status, 400, 'two addresses from a trusted balancer: refused');
  two.socket.destroy();
});

t.test('/metrics counts upgrades, refusals by status, bytes carried and pings sent', async (t) => {
  const before = await scrape(diag);
  const delta = (after: Awaited<ReturnType<typeof scrape>>, key: string): number => after.value(key) - before.value(key);
  const r = await rawUpgrade({ port, tls, proxyHeader: proxyHeader('203.0.113.8'), headers: { 'Sec-WebSocket-Protocol': 'alpn-ping' } });
  t.equal(r.status, 101);
  const banner = 'SSH-2.0-through-the-upgrade\r\n';
  r.socket.write(clientFrame(Opcode.binary, Buffer.from(banner)));
  let carried = '';
  let pinged = false;
  const got = await readFrames(r.socket, r.rest, (opcode, payload) => {
    if (opcode === Opcode.binary) carried += payload.toString();
    if (opcode === Opcode.ping) pinged = true;
    return pinged && carried.includes(banner.trim()) ? true : undefined;
  });
  t.equal(got, true, 'the SSH upstream answered through the upgrade, and a ping came');
  t.match(carried, /^ssh-upstream\n/);
  const refused = await rawUpgrade({ port, tls, proxyHeader: proxyHeader('203.0.113.8'), headers: { 'Sec-WebSocket-Key': undefined } });
  t.equal(refused.status, 400);
  refused.socket.destroy();
  const other = await rawUpgrade({ port, tls, proxyHeader: proxyHeader('203.0.113.8'), path: '/elsewhere' });
  t.equal(other.status, 404);
  other.socket.destroy();
  const after = await scrape(diag);
  t.equal(delta(after, 'gate_mux_conn_upgrades_total'), 1, 'one upgrade');
  t.equal(delta(after, 'gate_mux_conn_upgrades_refused_total{status="400"}'), 1, 'one refused with 400');
  t.equal(delta(after, 'gate_mux_conn_upgrades_refused_total{status="404"}'), 1, 'one upgrade to another path');
  t.equal(delta(after, 'gate_mux_conn_upgrade_bytes_total{direction="in"}'), banner.length, 'the bytes from the client');
  t.equal(delta(after, 'gate_mux_conn_upgrade_bytes_total{direction="out"}'), carried.length, 'the bytes to the client');
  t.ok(delta(after, 'gate_mux_conn_upgrade_pings_total') >= 1, 'the pings sent');
});

t.test('every carried connection ends, upstream sockets included', async (t) => {
  await until(() => gate.stats('multiplex').open === 0, 'every connection to end', 5000);
  await until(() => ssh.sockets.size === 0, 'the upstream sockets to close', 5000);
  t.equal(ssh.sockets.size, 0);
});
