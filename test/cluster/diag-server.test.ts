import t, { type Test } from 'tap';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { once } from 'node:events';
import { connect } from 'node:net';
import { parse as parseYaml, stringify } from 'yaml';
import { parseConfig } from '../../lib/config/load.js';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward } from '../../lib/handlers/builders.js';
import { DiagServer } from '../../lib/cluster/diag-server.js';
import { GateMetrics } from '../../lib/cluster/metrics.js';
import { clusterReadiness, listenersReadiness, type ChannelMismatch } from '../../lib/cluster/readiness.js';
import { joinedAgent } from '../helpers/cluster.js';
import { startGateProxy, type RunningGateProxy } from '../helpers/gate-proxy.js';
import { closeServer, readUntil, run, startTaggedTcpServer, tcpClient, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { freePort } from '../helpers/daemon.js';
import { startHaproxy } from '../helpers/haproxy.js';
import { httpGet, scrape } from '../helpers/prometheus.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

/**
 * The diagnostics listener (`diag_addr`): /healthz, /readyz and /metrics on a plain-HTTP
 * port of its own. Real connections go through a real GateProxy; /metrics is scraped over HTTP and
 * its counters must have moved by exactly what the test did.
 */

const ssh = await startTaggedTcpServer('SSH-2.0-upstream');
t.teardown(() => {
  for (const s of ssh.sockets) s.destroy();
  return closeServer(ssh.server);
});

async function startWithDiag(t: Test): Promise<{ gate: RunningGateProxy; diag: number }> {
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { ssh: `127.0.0.1:${ssh.port}` },
    top: { diag_addr: '127.0.0.1:0' },
  });
  const address = gate.proxy.diagAddress;
  if (!address) throw new Error('diag_addr is set but no diagnostics listener runs');
  return { gate, diag: address.port };
}

/** One SSH client through the public port to the upstream, then closed. */
async function sshRoundTrip(port: number): Promise<void> {
  const socket = await tcpClient(port);
  socket.write('SSH-2.0-client\r\n');
  await readUntil(socket, (s) => s.includes('SSH-2.0-client'));
  socket.destroy();
}

/** One HTTPS request to the proxy's own web endpoint (TLS terminated by the proxy). */
function httpsPing(gate: RunningGateProxy): Promise<number> {
  return new Promise((resolve, reject) => {
    const options: RequestOptions = {
      host: '127.0.0.1',
      port: gate.port('multiplex'),
      path: '/webapi/ping',
      servername: 'localhost',
      ca: gate.ca,
      agent: false,
    };
    // ALPN http/1.1 takes the `web` route (Node's https client offers none by default).
    (options as { ALPNProtocols?: string[] }).ALPNProtocols = ['http/1.1'];
    const req = httpsRequest(options, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('/metrics counts exactly the connections driven through the public port', async (t) => {
  const { gate, diag } = await startWithDiag(t);
  const port = gate.port('multiplex');
  const before = await scrape(diag);
  for (let i = 0; i < 3; i++) await sshRoundTrip(port);
  for (let i = 0; i < 2; i++) t.equal(await httpsPing(gate), 200, 'ping over TLS answered');
  // Neither a PROXY header nor any protocol the proxy knows: a detection failure.
  const junk = connect(port, '127.0.0.1');
  junk.on('error', () => {});
  junk.write('\x01\x02\x03\x04 not a protocol\r\n');
  await until(() => (gate.stats('multiplex').failures.GATE_ERR_UNKNOWN_PROTOCOL ?? 0) === 1, 'the junk connection to fail detection');
  junk.destroy();
  await until(() => gate.stats('multiplex').open === 0, 'every connection to close');
  const after = await scrape(diag);
  const delta = (key: string): number => after.value(key) - before.value(key);

  t.equal(delta('gate_mux_connections_accepted_total'), 6, 'six connections accepted');
  t.equal(delta('gate_mux_route_connections_total{route="ssh"}'), 3, 'three routed to ssh');
  t.equal(delta('gate_mux_route_connections_total{route="web"}'), 2, 'two routed to web (TLS, ALPN http/1.1)');
  t.equal(delta('gate_mux_protocol_connections_total{protocol="ssh"}'), 3, 'three detected as ssh');
  t.equal(delta('gate_mux_protocol_connections_total{protocol="tls"}'), 2, 'two detected as TLS');
  t.equal(delta('gate_mux_connection_failures_total{code="GATE_ERR_UNKNOWN_PROTOCOL"}'), 1, 'one detection failure, by its code');
  t.equal(after.value('gate_mux_connections_open'), 0, 'none open');
  t.equal(after.value('gate_mux_route_connections_open{route="ssh"}'), 0, 'none open on ssh');
  t.equal(delta('gate_mux_client_hello_bytes_count'), 2, 'two ClientHellos measured');
  t.ok(delta('gate_mux_client_hello_bytes_sum') > 2 * 100, 'their sizes summed');
  t.equal(delta('gate_mux_client_hello_bytes_bucket{le="+Inf"}'), 2, 'the +Inf bucket holds every hello');
  t.equal(delta('gate_mux_detection_seconds_count'), 5, 'five routing decisions timed (the failure made none)');
  t.equal(
    after.value('gate_mux_detection_seconds_bucket{le="+Inf"}'),
    after.value('gate_mux_detection_seconds_count'),
    'the histogram is cumulative',
  );
  t.ok(delta('gate_mux_route_bytes_total{route="ssh",direction="in"}') >= 3 * 'SSH-2.0-client\r\n'.length, 'client bytes counted on ssh');
  t.equal(after.value('gate_mux_tunnel_agents'), 0, 'no agent connected');
  t.equal(after.value('gate_mux_peer_dials_total{outcome="failed"}'), 0, 'peer dial counters exported from the start');
  t.ok(after.samples.has('process_cpu_user_seconds_total'), 'process metrics included');
  t.ok(after.samples.has('nodejs_heap_size_used_bytes'), 'Node heap metrics included');
});

t.test('peering, store and channel figures reported through GateMetrics', async (t) => {
  const { gate, diag } = await startWithDiag(t);
  proxyParts(gate.proxy).metrics.peerDial('ok');
  proxyParts(gate.proxy).metrics.peerDial('failed', 'GATE_ERR_DIAL_REFUSED');
  proxyParts(gate.proxy).metrics.peerDial('failed', 'GATE_ERR_DIAL_REFUSED');
  proxyParts(gate.proxy).metrics.storeError('announce');
  proxyParts(gate.proxy).metrics.channelMismatch(2);
  const m = await scrape(diag);
  t.equal(m.value('gate_mux_peer_dials_total{outcome="ok"}'), 1);
  t.equal(m.value('gate_mux_peer_dials_total{outcome="failed"}'), 2);
  t.equal(m.value('gate_mux_peer_dial_failures_total{code="GATE_ERR_DIAL_REFUSED"}'), 2);
  t.equal(m.value('gate_mux_store_errors_total{operation="announce"}'), 1);
  t.equal(m.value('gate_mux_channel_mismatches'), 2);
  const again = await scrape(diag);
  t.equal(again.value('gate_mux_peer_dials_total{outcome="failed"}'), 2, 'a second scrape reads the same, not double');
});

t.test("the event loop's delay: p50, p99 and the worst stall since start", async (t) => {
  const { diag } = await startWithDiag(t);
  // Block this process's loop (the proxy's) for 300 ms, as synchronous work on a request would.
  const until = Date.now() + 300;
  while (Date.now() < until);
  await new Promise((resolve) => setTimeout(resolve, 20));
  const m = await scrape(diag);
  const max = m.value('gate_mux_event_loop_delay_seconds{stat="max"}');
  t.ok(max >= 0.25, `the 300 ms stall shows in max (${max} s)`);
  t.ok(m.value('gate_mux_event_loop_delay_seconds{stat="max_recent"}') >= 0.25, 'and in the recent window');
  t.ok(
    m.samples.has('gate_mux_event_loop_delay_seconds{stat="p50"}') && m.samples.has('gate_mux_event_loop_delay_seconds{stat="p99"}'),
    'p50 and p99 exported',
  );
  t.ok(m.value('gate_mux_event_loop_delay_seconds{stat="p50"}') < max, 'the median is below the worst');
});

t.test('/healthz, /readyz, wrong paths and methods', async (t) => {
  const { gate, diag } = await startWithDiag(t);
  const health = await httpGet(diag, '/healthz');
  t.equal(health.status, 200);
  const ready = await httpGet(diag, '/readyz');
  t.equal(ready.status, 200, ready.body);
  const report = JSON.parse(ready.body) as {
    ready: boolean;
    checks: { listeners: { ready: boolean; detail: { listeners: Array<{ name: string; listening: boolean }> } } };
  };
  t.equal(report.ready, true);
  t.same(
    report.checks.listeners.detail.listeners.map((l) => [l.name, l.listening]),
    [['multiplex', true]],
    'the public listener, listening',
  );
  t.equal((await httpGet(diag, '/metrics', 'POST')).status, 405, 'POST /metrics');
  t.equal((await httpGet(diag, '/metrics', 'POST')).allow, 'GET, HEAD', 'with Allow');
  t.equal((await httpGet(diag, '/readyz', 'HEAD')).status, 200, 'HEAD /readyz');
  t.equal((await httpGet(diag, '/nope')).status, 404, 'an unknown path');
  t.equal((await httpGet(diag, '/')).status, 404, 'the root');
  t.equal((await httpGet(diag, '/readyz?verbose=1')).status, 200, 'a query string is ignored');
  t.ok(gate.proxy.diagAddress!.port !== gate.port('multiplex'), 'a port of its own');
});

t.test('/metrics is never served on the public port (curl, plaintext and TLS)', async (t) => {
  const curl = requirePeer(t, 'curl', 'curl');
  if (!curl) return;
  const { gate, diag } = await startWithDiag(t);
  const port = gate.port('multiplex');
  for (const url of [`http://127.0.0.1:${port}/metrics`, `https://localhost:${port}/metrics`]) {
    const out = await run(curl, [
      '-sS',
      '--noproxy',
      '*',
      '--resolve',
      `localhost:${port}:127.0.0.1`,
      '--cacert',
      gate.caFile,
      '-w',
      '\n%{http_code}',
      url,
    ]);
    t.equal(out.code, 0, out.stderr);
    t.match(out.stdout, /\n404$/, `${url}: 404`);
    t.notMatch(out.stdout, /gate_mux_|# TYPE/, `${url}: no metrics in the body`);
  }
  const diagOut = await run(curl, ['-sS', '--noproxy', '*', `http://127.0.0.1:${diag}/metrics`]);
  t.match(diagOut.stdout, /# TYPE gate_mux_connections_accepted_total counter/, 'the diagnostics port does serve them (to curl too)');
});

t.test('/readyz is 503 while the proxy closes, and the diagnostics port goes with it', async (t) => {
  const { gate, diag } = await startWithDiag(t);
  const port = gate.port('multiplex');
  // An open SSH connection holds the close in its grace period.
  const held = await tcpClient(port);
  held.write('SSH-2.0-held\r\n');
  await readUntil(held, (s) => s.includes('SSH-2.0-held'));
  const closing = gate.proxy.close({ graceMs: 10_000 });
  const during = await httpGet(diag, '/readyz');
  t.equal(during.status, 503, 'not ready while closing');
  t.equal((JSON.parse(during.body) as { ready: boolean }).ready, false);
  t.equal((await httpGet(diag, '/healthz')).status, 200, 'still alive while draining');
  const mid = await scrape(diag);
  t.equal(mid.value('gate_mux_connections_open'), 1, 'the draining listener is still counted');
  held.destroy();
  await closing;
  await t.rejects(httpGet(diag, '/healthz'), { code: 'ECONNREFUSED' }, 'the diagnostics listener closed with the proxy');
});

t.test('/readyz follows a multiplexer: 503 before it listens, 200 while it does, 503 once closed', async (t) => {
  const mux = new Multiplexer({
    routes: [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: ssh.port }) }],
  });
  const metrics = new GateMetrics();
  metrics.setSources({ listeners: () => [mux.stats()], tunnels: () => ({ agents: 0, streamsOpened: 0, streamsReset: 0 }) });
  const server = await DiagServer.start({
    host: '127.0.0.1',
    port: 0,
    metrics,
    readiness: () => [listenersReadiness(() => [{ name: 'test', address: '127.0.0.1:0', listening: mux.listening }])],
  });
  t.teardown(() => server.close());
  const port = server.address.port;
  t.equal((await httpGet(port, '/readyz')).status, 503, 'before listen');
  const bound = await mux.listen({ host: '127.0.0.1', port: 0 });
  t.equal((await httpGet(port, '/readyz')).status, 200, 'listening');
  await sshRoundTrip(bound.port);
  await until(() => mux.stats().open === 0, 'the connection to close');
  t.equal((await scrape(port)).value('gate_mux_route_connections_total{route="ssh"}'), 1, 'its connection counted');
  await mux.close({ graceMs: 0 });
  t.equal((await httpGet(port, '/readyz')).status, 503, 'closed');
});

t.test('cluster readiness: registered and not draining; mismatches shown, not fatal', async (t) => {
  const member = {
    proxyId: 'p-1',
    registered: false,
    isDraining: false,
    mismatches: [] as ChannelMismatch[],
    channelMismatches(): ChannelMismatch[] {
      return this.mismatches;
    },
  };
  const { gate, diag } = await startWithDiag(t);
  proxyParts(gate.proxy).addReadiness(clusterReadiness(member, 'redis://:s3cret-pass@127.0.0.1:6379/0'));
  const readyz = async (): Promise<{ status: number; cluster: Record<string, unknown> }> => {
    const res = await httpGet(diag, '/readyz');
    return {
      status: res.status,
      cluster: (JSON.parse(res.body) as { checks: { cluster: { detail: Record<string, unknown> } } }).checks.cluster.detail,
    };
  };
  let r = await readyz();
  t.equal(r.status, 503, 'not registered in the store: not ready');
  t.equal(r.cluster.registered, false);
  t.equal(r.cluster.store, 'redis://:***@127.0.0.1:6379/0', 'the store named without its password');
  t.notMatch(JSON.stringify(r.cluster), /s3cret/, 'the password appears nowhere');
  member.registered = true;
  member.mismatches = [{ proxyId: 'p-2', theirs: 'sha256:bb', ours: 'sha256:aa' }];
  r = await readyz();
  t.equal(r.status, 200, 'registered: ready, a channel mismatch notwithstanding');
  t.same(r.cluster.channelMismatches, member.mismatches, 'the mismatch named in the detail');
  member.isDraining = true;
  r = await readyz();
  t.equal(r.status, 503, 'draining: not ready');
  t.equal(r.cluster.draining, true);
});

t.test('reload: diag_addr kept, moved and removed', async (t) => {
  const { gate, diag } = await startWithDiag(t);
  const reloadWith = async (top: Record<string, unknown>): Promise<void> => {
    const doc = parseConfigDoc(gate.yaml);
    delete doc.diag_addr;
    const { config } = parseConfig(stringify({ ...doc, ...top }), { source: 'reload' });
    await gate.proxy.reload(config);
  };
  await reloadWith({ diag_addr: '127.0.0.1:0' });
  t.equal(gate.proxy.diagAddress?.port, diag, 'the same address asked for: the same listener');
  await sshRoundTrip(gate.port('multiplex'));
  await until(() => gate.stats('multiplex').open === 0, 'the connection to close');
  await reloadWith({ diag_addr: '127.0.0.2:0' });
  const moved = gate.proxy.diagAddress;
  t.equal(moved?.address, '127.0.0.2', 'a new address: a new listener');
  await t.rejects(httpGet(diag, '/healthz'), { code: 'ECONNREFUSED' }, 'the old one closed');
  t.equal((await scrape(moved!.port, '127.0.0.2')).value('gate_mux_route_connections_total{route="ssh"}'), 1, 'the counts carried over');
  await reloadWith({});
  t.equal(gate.proxy.diagAddress, undefined, 'diag_addr removed: none');
});

function parseConfigDoc(yaml: string): Record<string, unknown> {
  return parseYaml(yaml) as Record<string, unknown>;
}

t.test('HAProxy health-checks /readyz: a proxy that is not ready gets no clients', async (t) => {
  const haproxy = requirePeer(t, 'haproxy', 'haproxy');
  if (!haproxy) return;
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { ssh: `127.0.0.1:${ssh.port}` },
    proxyService: { proxy_protocol: 'on', proxy_protocol_trusted_networks: ['127.0.0.1/32'] },
    top: { diag_addr: '127.0.0.1:0' },
  });
  const member = { proxyId: 'p-1', registered: true };
  proxyParts(gate.proxy).addReadiness(clusterReadiness(member, 'memory'));
  const front = await freePort('127.0.0.2');
  // docs/metrics.md's example: the check goes to the diagnostics port, the traffic (with a PROXY v2
  // header) to the public one.
  await startHaproxy(
    t,
    haproxy,
    [
      'listen front',
      `  bind 127.0.0.2:${front}`,
      '  option httpchk GET /readyz',
      '  http-check expect status 200',
      '  default-server inter 100ms fall 1 rise 1 send-proxy-v2',
      '  source 127.0.0.1',
      `  server gate 127.0.0.1:${gate.port('multiplex')} check port ${gate.proxy.diagAddress!.port}`,
    ],
    { host: '127.0.0.2', port: front },
  );
  /** One SSH greeting through HAProxy: true when the upstream answered. */
  const through = async (): Promise<boolean> => {
    const socket = connect(front, '127.0.0.2');
    socket.on('error', () => {});
    socket.write('SSH-2.0-via-haproxy\r\n');
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    await Promise.race([once(socket, 'close'), new Promise((r) => setTimeout(r, 1000))]);
    socket.destroy();
    return got.includes('SSH-2.0-upstream');
  };
  /** Bounded: HAProxy notices a change at its next check (100 ms). */
  const eventually = async (want: boolean): Promise<boolean> => {
    for (let i = 0; i < 50; i++) {
      if ((await through()) === want) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  };
  t.ok(await eventually(true), 'ready: clients reach the upstream through HAProxy');
  member.registered = false;
  t.ok(await eventually(false), '/readyz 503: HAProxy takes the proxy out');
  member.registered = true;
  t.ok(await eventually(true), 'ready again: back in');
});

t.test('a listener dropped by a reload keeps its counts in /metrics', async (t) => {
  const gate = await startGateProxy(t, {
    mode: 'separate',
    upstreams: { ssh: `127.0.0.1:${ssh.port}` },
    top: { diag_addr: '127.0.0.1:0' },
  });
  const diag = gate.proxy.diagAddress!.port;
  await sshRoundTrip(gate.port('ssh'));
  await until(() => gate.stats('ssh').open === 0, 'the connection to close');
  const before = await scrape(diag);
  t.equal(before.value('gate_mux_route_connections_total{route="ssh"}'), 1, 'counted on the ssh port');
  const doc = parseConfigDoc(gate.yaml);
  const { config } = parseConfig(stringify({ ...doc, auth_service: { proxy_listener_mode: 'multiplex' } }), { source: 'reload' });
  await gate.proxy.reload(config);
  t.notOk(
    proxyParts(gate.proxy).plan.listeners.some((l) => l.name === 'ssh'),
    'the ssh port is gone',
  );
  // Whether the dropped listener is still closing (counted live) or gone (counted as retired),
  // its totals are the same.
  const after = await scrape(diag);
  t.equal(after.value('gate_mux_route_connections_total{route="ssh"}'), 1, 'its count is still there, not reset');
  t.equal(
    after.value('gate_mux_connections_accepted_total'),
    before.value('gate_mux_connections_accepted_total'),
    'nor the accepted total',
  );
  t.equal(after.value('gate_mux_connections_open'), 0);
});

t.test('tunnel metrics: a joined agent, a stream through it, the agent gone', async (t) => {
  const target = `127.0.0.1:${ssh.port}`;
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { ssh: `tunnel:metrics-agent/${target}` },
    top: { diag_addr: '127.0.0.1:0' },
  });
  const diag = gate.proxy.diagAddress!.port;
  const agent = await (await joinedAgent(t, gate, 'metrics-agent', [target])).connect();
  const before = await scrape(diag);
  t.equal(before.value('gate_mux_tunnel_agents'), 1, 'one agent connected');
  await sshRoundTrip(gate.port('multiplex'));
  await sshRoundTrip(gate.port('multiplex'));
  await until(() => gate.stats('multiplex').open === 1, 'the SSH connections to close (the tunnel stays)');
  const after = await scrape(diag);
  t.equal(
    after.value('gate_mux_tunnel_streams_opened_total') - before.value('gate_mux_tunnel_streams_opened_total'),
    2,
    'two streams through the agent',
  );
  await agent.close();
  await until(() => gate.proxy.tunnels.agents().length === 0, 'the proxy to see the agent go');
  t.equal((await scrape(diag)).value('gate_mux_tunnel_agents'), 0, 'no agent connected');
});
