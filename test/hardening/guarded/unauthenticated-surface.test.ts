// Every surface an anonymous client reaches on a real `gate-mux proxy` process, each attacked
// under the ping guard (test/helpers/ping-guard.ts): the shared port before routing (a flood of
// silent connections, slowloris, fuzzed hellos), the web endpoints (ping, version channels with a
// forward_url whose upstream never answers, the CA, oversized headers, headers that never end),
// the tunnel route before an agent is admitted, the connection upgrade (WebSocket) before anything
// it carries is routed, the peering port before a peer is, and the diagnostics listener (its
// token-guarded paths asked without it). During each,
// every ping answers within 250 ms; each abusive connection is closed or answered with its code.
// The admin endpoint is attacked here too (anonymous, a foreign certificate, an agent's); the join
// and renewal endpoints have their own file (join-attacks.test.ts).
import t, { type Test } from 'tap';
import { connect as netConnect, createServer, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { request } from 'node:http';
import { clientHelloHandshake, records } from '../../../bench/hellos.js';
import { CertificateAuthority } from '../../../lib/pki/certificate-authority.js';
import { ADMIN_PATH_PREFIX, AGENT_CA_PATH, FIND_PATH, PING_PATH } from '../../../lib/wire/names.js';
import { clusterAuthority } from '../../helpers/cluster.js';
import { closeServer, listening } from '../../helpers/net.js';
import { expectRefusals, REFUSAL_BOUND_MS, startGuardedProxy, timed, underPingGuard, type Timed } from '../../helpers/ping-guard.js';
import { prng } from '../../helpers/prng.js';
import { scrape } from '../../helpers/prometheus.js';
import { inParallel, webRequest } from '../../helpers/web-abuse.js';
import { clientFrame, closeCode, Opcode, rawUpgrade } from '../../helpers/conn-upgrade.js';

const DETECT_TIMEOUT_MS = 1500;
/** `web_headers_timeout`: short, so the slow-headers attack meets it within the test. */
const WEB_HEADERS_TIMEOUT_MS = 1000;

/** How a raw connection ended: closed by the proxy (FIN or reset) and when. */
interface Held {
  closedByServer: boolean;
  ms: number;
}

/**
 * A connection to `port` that sends `bytes` (at once, or one byte every `dribbleMs`), then waits
 * for the proxy to close it; gives up (closedByServer false) after `giveUpMs`.
 */
function hold(port: number, bytes: Buffer, options: { dribbleMs?: number; giveUpMs: number }): Promise<Held> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket: Socket = netConnect({ host: '127.0.0.1', port });
    let sent = 0;
    let dribbler: NodeJS.Timeout | undefined;
    const done = (closedByServer: boolean): void => {
      clearInterval(dribbler);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ closedByServer, ms: performance.now() - started });
    };
    const giveUp = setTimeout(() => done(false), options.giveUpMs);
    socket.on('data', () => {});
    socket.on('error', () => done(true));
    socket.on('end', () => done(true));
    socket.on('close', () => done(true));
    socket.once('connect', () => {
      if (options.dribbleMs === undefined) {
        if (bytes.length > 0) socket.write(bytes);
        return;
      }
      dribbler = setInterval(() => {
        if (sent < bytes.length && !socket.destroyed) socket.write(bytes.subarray(sent, ++sent));
      }, options.dribbleMs);
    });
  });
}

function allClosedWithin(t: Test, label: string, held: Held[], boundMs: number): void {
  const open = held.filter((h) => !h.closedByServer).length;
  const slowest = Math.max(...held.map((h) => h.ms));
  t.equal(open, 0, `${label}: all ${held.length} closed by the proxy`);
  t.ok(slowest < boundMs, `${label}: each within ${boundMs} ms (slowest ${slowest.toFixed(0)} ms)`);
}

t.test('every unauthenticated surface under the ping guard', async (t) => {
  // A version channel whose upstream accepts and never answers.
  const hung = new Set<Socket>();
  let upstreamConnections = 0;
  const hanging = createServer((socket) => {
    upstreamConnections++;
    hung.add(socket);
    socket.on('error', () => {});
  });
  const hangingPort = await listening(hanging);
  t.teardown(() => {
    for (const s of hung) s.destroy();
    return closeServer(hanging);
  });
  const proxy = await startGuardedProxy(t, {
    proxy: [
      `detect_timeout: ${DETECT_TIMEOUT_MS}ms`,
      `web_headers_timeout: ${WEB_HEADERS_TIMEOUT_MS}ms`,
      'automatic_upgrades_channels:',
      `  hung: {forward_url: "http://127.0.0.1:${hangingPort}/v1", allow_insecure_forward_url: true}`,
      '  stable/cloud: {static_version: v1.2.3}',
    ],
  });
  const giveUpMs = DETECT_TIMEOUT_MS + REFUSAL_BOUND_MS;
  const foreignPair = CertificateAuthority.create('not the cluster CA').issue({ commonName: 'intruder', usage: 'client' });

  // The shared port, before anything is routed.
  const silent = await underPingGuard(t, proxy, '400 silent connections at once', () =>
    inParallel(400, 400, () => hold(proxy.port, Buffer.alloc(0), { giveUpMs })),
  );
  allClosedWithin(t, 'silent connections (detection deadline)', silent, giveUpMs);
  const hello = records(clientHelloHandshake({ sni: 'localhost', alpn: ['http/1.1'], pqKeyShareBytes: 1184 }));
  const slowloris = await underPingGuard(t, proxy, '200 hellos dribbled a byte every 50 ms', () =>
    inParallel(200, 200, () => hold(proxy.port, hello, { dribbleMs: 50, giveUpMs })),
  );
  allClosedWithin(t, 'slowloris (detection deadline)', slowloris, giveUpMs);
  const random = prng(22);
  const fuzzed = Array.from({ length: 400 }, () => {
    const bytes = Buffer.from(hello);
    for (let flips = random.range(1, 12); flips > 0; flips--) bytes[random.int(bytes.length)] = random.u32() & 0xff;
    return random.chance(0.3) ? bytes.subarray(0, random.int(bytes.length)) : bytes;
  });
  const fuzz = await underPingGuard(t, proxy, '400 fuzzed ClientHellos, 50 in flight', () =>
    inParallel(400, 50, (i) => hold(proxy.port, fuzzed[i]!, { giveUpMs })),
  );
  // Refused at once, or routed to the web server and failed there, or held to the deadline (the
  // detection deadline, or the web server's handshake timeout, which is set to the same).
  allClosedWithin(t, 'fuzzed hellos', fuzz, giveUpMs);
  const biggest = Buffer.concat([Buffer.from([0x16, 0x03, 0x01, 0x40, 0x00]), Buffer.alloc(64 * 1024, 1)]);
  const big = await underPingGuard(t, proxy, '100 records past the hello cap', () =>
    inParallel(100, 100, () => hold(proxy.port, biggest, { giveUpMs })),
  );
  allClosedWithin(t, 'hellos past the cap', big, REFUSAL_BOUND_MS);

  // The web endpoints.
  const get = (path: string, headers: Record<string, string> = {}) => timed(() => webRequest(proxy, path, { method: 'GET', headers }));
  const pings = await underPingGuard(t, proxy, '300 pings, 20 in flight', () => inParallel(300, 20, () => get(PING_PATH)));
  t.ok(
    pings.every((p) => p.value.status === 200),
    'every ping of the flood answered 200',
  );
  const cas = await underPingGuard(t, proxy, '300 CA downloads, 20 in flight', () => inParallel(300, 20, () => get(AGENT_CA_PATH)));
  t.ok(
    cas.every((p) => p.value.status === 200 && p.value.body.includes('BEGIN CERTIFICATE')),
    'every CA download answered',
  );
  const channelPaths = [
    '/v1/webapi/automaticupgrades/channel/stable/cloud/version',
    `/v1/webapi/automaticupgrades/channel/${'a/'.repeat(2000)}version`,
    '/v1/webapi/automaticupgrades/channel/%ff%fe/version',
  ];
  const channels = await underPingGuard(t, proxy, '300 channel lookups (good, deep and bad names)', () =>
    inParallel(300, 20, (i) => get(channelPaths[i % 3]!)),
  );
  t.ok(
    channels.every((c, i) => (i % 3 === 0 ? c.value.status === 200 : c.value.status === 400 || c.value.status === 404)),
    'answered 200, or 400/404 for the bad names',
  );
  // The rollouts' find endpoint: answered from memory (no store round trip), its query bounded.
  const findPaths = [
    `${FIND_PATH}?host=2f1c8a52-0d7e-4b7e-9a4f-5b8e7c1d2e3f&group=prod`,
    `${FIND_PATH}?host=not-a-uuid`,
    `${FIND_PATH}?host=${'a'.repeat(4000)}`,
  ];
  const finds = await underPingGuard(t, proxy, '300 find lookups (good, bad and oversized queries)', () =>
    inParallel(300, 20, (i) => get(findPaths[i % 3]!)),
  );
  t.ok(
    finds.every((f, i) => (i % 3 === 0 ? f.value.status === 200 && f.value.body.includes('"managed"') : f.value.status === 400)),
    'find answered 200 (unmanaged: no rollout configured), or 400 for the bad and oversized queries',
  );
  const hungAnswers = await underPingGuard(t, proxy, '100 lookups of the channel whose upstream hangs, 25 at once', () =>
    inParallel(100, 25, () => get('/v1/webapi/automaticupgrades/channel/hung/version')),
  );
  expectRefusals(
    t,
    'a hanging upstream',
    hungAnswers.map((a) => ({ ...a, ms: a.ms - 5000 })),
    ['upstream_failed'],
  );
  t.equal(upstreamConnections, 1, 'the 100 lookups shared one upstream fetch (then its cached failure)');
  const bigHeaders = await underPingGuard(t, proxy, '100 requests with 60 KiB of headers', () =>
    inParallel(100, 20, () =>
      timed(() =>
        webRequest(proxy, PING_PATH, { method: 'GET', headers: { 'X-Pad': 'x'.repeat(60 * 1024) } }).then((a) => ({
          ...a,
          code: String(a.status),
        })),
      ),
    ),
  );
  expectRefusals(t, 'oversized headers', bigHeaders, ['431', '0']);

  // The admin endpoint: refused by the client certificate alone, before the body is read or the
  // store asked, whether there is none, one of another CA, or an agent's of the cluster CA itself.
  const agent = (await clusterAuthority(proxy.dataDir)).issue({ commonName: 'db-1', usage: 'client' });
  const adminBody = JSON.stringify({ manifest: `kind: role\n# ${'x'.repeat(100 * 1024)}\n`, force: true });
  const admin = await underPingGuard(t, proxy, '300 admin requests (none, foreign and agent certificates), 20 in flight', () =>
    inParallel(300, 20, (i) =>
      timed(() =>
        webRequest(proxy, `${ADMIN_PATH_PREFIX}${i % 2 === 0 ? 'create' : 'status'}`, {
          method: i % 2 === 0 ? 'POST' : 'GET',
          ...(i % 2 === 0 ? { body: adminBody, headers: { 'Content-Type': 'application/json' } } : {}),
          ...(i % 3 === 1 ? foreignPair : i % 3 === 2 ? agent : {}),
        }),
      ),
    ),
  );
  expectRefusals(t, 'the admin endpoint without an admin identity', admin, ['GATE_ERR_ADMIN_UNAUTHENTICATED']);
  t.ok(
    admin.every((a) => a.value.status === 401),
    'each a 401',
  );

  // Slow headers after TLS: the web servers are handed their connections, so Node's own
  // headersTimeout never runs; the proxy's header deadline answers 408 and closes each at
  // web_headers_timeout (counted from the end of TLS), and holding them costs the loop nothing.
  const slowHeaders = await underPingGuard(t, proxy, '100 requests whose headers come a byte every 50 ms', () =>
    inParallel(100, 100, () =>
      timed(() =>
        webRequest(proxy, PING_PATH, {
          method: 'GET',
          headers: { 'X-Slow': 'x'.repeat(64) },
          dribble: { chunkBytes: 1, everyMs: 50, head: true },
          giveUpMs: WEB_HEADERS_TIMEOUT_MS + REFUSAL_BOUND_MS,
        }),
      ),
    ),
  );
  expectRefusals(
    t,
    'slow headers (the header deadline, 408)',
    slowHeaders.map((a) => ({ ...a, ms: a.ms - WEB_HEADERS_TIMEOUT_MS })),
    ['GATE_ERR_WEB_HEADERS_TIMEOUT'],
  );

  // The tunnel route before an agent is admitted: TLS with either tunnel ALPN (the framing's,
  // whose refusal is a framed GOAWAY, or HTTP/2's) and no certificate, or another CA's, then garbage.
  const foreign = CertificateAuthority.create('not the cluster CA').issue({ commonName: 'intruder', usage: 'client' });
  const tunnelAttempt = (withForeign: boolean, alpn: string): Promise<Timed<{ status: number; code: string }>> =>
    timed(
      () =>
        new Promise((resolve) => {
          const socket = tlsConnect({
            host: '127.0.0.1',
            port: proxy.port,
            servername: 'localhost',
            ca: proxy.ca,
            ALPNProtocols: [alpn],
            ...(withForeign ? foreign : {}),
          });
          const timer = setTimeout(() => finish('still-open'), giveUpMs);
          const finish = (code: string): void => {
            clearTimeout(timer);
            socket.destroy();
            resolve({ status: 0, code });
          };
          socket.on('secureConnect', () => socket.write(Buffer.alloc(16 * 1024, 0x55)));
          socket.on('error', () => finish('closed'));
          socket.on('close', () => finish('closed'));
          socket.on('data', () => {});
        }),
    );
  const tunnels = await underPingGuard(t, proxy, '200 tunnel attempts without an agent certificate', () =>
    inParallel(200, 25, (i) => tunnelAttempt(i % 2 === 0, 'gate-reversetunnel-framed')),
  );
  expectRefusals(t, 'tunnel route before admission', tunnels, ['closed']);

  // The connection upgrade (TLS routing through load balancers that end TLS): refused before the
  // WebSocket exists when the request is wrong; once upgraded, a carried stream is a connection of
  // the shared port, under the same detection deadline and message bounds.
  const tlsToProxy = { ca: proxy.ca, servername: 'localhost' };
  const badUpgradeHeaders: Array<Record<string, string | undefined>> = [
    { 'Sec-WebSocket-Key': undefined },
    { 'Sec-WebSocket-Key': 'not-base64-of-16-bytes' },
    { 'Sec-WebSocket-Protocol': 'chat' },
    { 'Sec-WebSocket-Protocol': undefined },
    { 'Sec-WebSocket-Version': '8' },
  ];
  const refusedUpgrades = await underPingGuard(t, proxy, '200 malformed upgrade requests, 25 in flight', () =>
    inParallel(200, 25, (i) =>
      timed(async () => {
        const r = await rawUpgrade({ port: proxy.port, tls: tlsToProxy, headers: badUpgradeHeaders[i % badUpgradeHeaders.length]! });
        r.socket.destroy();
        return {
          status: r.status,
          code:
            r.status >= 400 && r.rest.toString().includes('GATE_ERR_CONN_UPGRADE_REFUSED')
              ? 'GATE_ERR_CONN_UPGRADE_REFUSED'
              : `${r.status}`,
        };
      }),
    ),
  );
  expectRefusals(t, 'malformed upgrades', refusedUpgrades, ['GATE_ERR_CONN_UPGRADE_REFUSED']);
  const silentUpgrades = await underPingGuard(t, proxy, '100 upgrades that never send a frame', () =>
    inParallel(100, 100, () =>
      timed(async () => {
        const r = await rawUpgrade({ port: proxy.port, tls: tlsToProxy });
        const ended = await closeCode(r.socket as Socket, r.rest, giveUpMs);
        return { status: r.status, code: r.status === 101 && ended !== 'stalled' ? 'closed' : `${r.status}/${String(ended)}` };
      }),
    ),
  );
  // Bounded by the detection deadline, as a silent connection on the port is.
  expectRefusals(
    t,
    'silent upgrades',
    silentUpgrades.map((u) => ({ ...u, ms: u.ms - DETECT_TIMEOUT_MS })),
    ['closed'],
  );
  const oversized = await underPingGuard(t, proxy, '50 upgrades sending a 1 MiB message', () =>
    inParallel(50, 25, () =>
      timed(async () => {
        const r = await rawUpgrade({ port: proxy.port, tls: tlsToProxy });
        r.socket.write(clientFrame(Opcode.binary, Buffer.alloc(1 << 20, 0x16)));
        const code = await closeCode(r.socket as Socket, r.rest, giveUpMs);
        return { status: r.status, code: String(code) };
      }),
    ),
  );
  expectRefusals(t, 'oversized messages (1009: message too big)', oversized, ['1009']);

  // The peering port before a peer is admitted.
  const peers = await underPingGuard(t, proxy, '200 peering attempts without a proxy certificate', () =>
    inParallel(200, 25, (i) =>
      i % 2 === 0 ? hold(proxy.peerPort, hello, { giveUpMs }) : hold(proxy.peerPort, random.bytes(4096), { giveUpMs }),
    ),
  );
  allClosedWithin(t, 'peering port', peers, giveUpMs);

  // The diagnostics listener: scrapes (with its token) and probes, many at once; and the
  // guarded paths asked without the token, or with a wrong one, refused 401 with the code.
  const bearer = { Authorization: `Bearer ${proxy.diagToken}` };
  const diagGet = (path: string, headers: Record<string, string> = {}): Promise<Timed<number>> =>
    timed(
      () =>
        new Promise((resolve) => {
          const req = request({ host: '127.0.0.1', port: proxy.diagPort, path, agent: false, headers }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          });
          req.on('error', () => resolve(0));
          req.end();
        }),
    );
  const diag = await underPingGuard(t, proxy, '200 /metrics scrapes and 200 probes, 20 in flight', () =>
    inParallel(400, 20, (i) => (i % 2 === 0 ? diagGet('/metrics', bearer) : diagGet('/readyz'))),
  );
  t.ok(
    diag.every((d) => d.value === 200),
    'every scrape and probe answered',
  );
  const wrongTokens: Array<Record<string, string>> = [
    {},
    { Authorization: 'Bearer not-the-token-0123456789' },
    { Authorization: `Basic ${proxy.diagToken}` },
  ];
  const unauthorized = await underPingGuard(t, proxy, '300 /metrics and /v1/inventory without the token, 20 in flight', () =>
    inParallel(300, 20, (i) =>
      diagGet(i % 2 === 0 ? '/metrics' : '/v1/inventory', wrongTokens[i % 3]).then((d) => ({
        ...d,
        value: { status: d.value, code: d.value === 401 ? 'GATE_ERR_DIAG_UNAUTHORIZED' : String(d.value) },
      })),
    ),
  );
  expectRefusals(t, 'diagnostics without the token', unauthorized, ['GATE_ERR_DIAG_UNAUTHORIZED']);

  const metrics = await scrape(proxy.diagPort, '127.0.0.1', proxy.diagToken);
  t.ok(metrics.samples.has('gate_mux_event_loop_delay_seconds{stat="max"}'), 'the event loop delay is exported');
  t.comment(
    `event loop delay since start: p99 ${metrics.value('gate_mux_event_loop_delay_seconds{stat="p99"}')} s, max ${metrics.value('gate_mux_event_loop_delay_seconds{stat="max"}')} s`,
  );
});
