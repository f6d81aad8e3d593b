import t, { type Test } from 'tap';
import { startGateProxy, PROXY_VERSION, type RunningGateProxy } from '../helpers/gate-proxy.js';
import { describeResult, runClient } from '../helpers/clients.js';
import { requirePeer } from '../helpers/peers.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * Stock web clients through the proxy to its own web handler (GET /webapi/ping and the version
 * channel): curl over HTTP/1.1 and HTTP/2 with TLS (certificate verified against the proxy's
 * development CA) and in plaintext (HTTP/1.1 and h2c prior knowledge), on the shared port and on
 * the separate web port; and headless Chromium, whose post-quantum ClientHello (X25519MLKEM768,
 * ~1.8 KB, two TCP segments) is the one that breaks routers which read only the first segment.
 * The other protocols' routes are configured (their upstreams are never dialled) so web traffic
 * is picked out of a full route table.
 */

const curl = requirePeer(t, 'curl', 'curl');
// Upstreams nobody dials in this file: port 9 (discard) on loopback, only there to fill the table.
const upstreams = {
  ssh: '127.0.0.1:9',
  kube: '127.0.0.1:9',
  postgres: '127.0.0.1:9',
  mysql: '127.0.0.1:9',
  redis: '127.0.0.1:9',
  mongodb: '127.0.0.1:9',
};

interface Ping {
  server_version?: string;
  proxy?: { tls_routing_enabled?: boolean };
}

async function get(
  gate: RunningGateProxy,
  port: number,
  options: { scheme: 'https' | 'http'; http: '--http1.1' | '--http2' | '--http2-prior-knowledge'; path: string },
): Promise<{ body: string; httpVersion: string }> {
  const url = `${options.scheme}://localhost:${port}${options.path}`;
  const result = await runClient(curl!, [
    '-sS',
    '--fail',
    '--max-time',
    '20',
    '--resolve',
    `localhost:${port}:127.0.0.1`,
    '--cacert',
    gate.caFile,
    '--noproxy',
    '*',
    options.http,
    '-w',
    '\n%{http_version}',
    url,
  ]);
  if (result.code !== 0) throw new Error(`curl ${options.http} ${url}: ${describeResult(result)}`);
  const text = result.stdout.toString();
  const cut = text.lastIndexOf('\n');
  return { body: text.slice(0, cut), httpVersion: text.slice(cut + 1) };
}

async function pingAndChannel(t: Test, gate: RunningGateProxy, port: number, tlsRouting: boolean): Promise<void> {
  const cases = [
    { scheme: 'https', http: '--http1.1', version: '1.1' },
    { scheme: 'https', http: '--http2', version: '2' },
    { scheme: 'http', http: '--http1.1', version: '1.1' },
    { scheme: 'http', http: '--http2-prior-knowledge', version: '2' },
  ] as const;
  for (const c of cases) {
    const ping = await get(gate, port, { scheme: c.scheme, http: c.http, path: '/webapi/ping' });
    t.equal(ping.httpVersion, c.version, `${c.scheme} ${c.http}: HTTP/${c.version}`);
    const parsed = JSON.parse(ping.body) as Ping;
    t.equal(parsed.server_version, PROXY_VERSION, `${c.scheme} ${c.http}: ping answered by this proxy`);
    t.equal(parsed.proxy?.tls_routing_enabled, tlsRouting, `${c.scheme} ${c.http}: tls_routing_enabled`);
  }
  const channel = await get(gate, port, { scheme: 'https', http: '--http2', path: '/v1/webapi/automaticupgrades/channel/default/version' });
  t.equal(channel.body, `v${PROXY_VERSION}`, 'version channel over h2');
}

if (curl) {
  const mux = await startGateProxy(t, { mode: 'multiplex', upstreams });
  const separate = await startGateProxy(t, { mode: 'separate', upstreams });

  t.test('multiplexed port: curl, HTTP/1.1 and HTTP/2, TLS and plaintext', async (t) => {
    await pingAndChannel(t, mux, mux.port('multiplex'), true);
    t.equal(mux.route('multiplex', 'web').connections, 3, 'TLS with ALPN http/1.1 or h2: the web route');
    t.equal(mux.route('multiplex', 'web-plaintext').connections, 2, 'plaintext HTTP/1.1 and h2c preface');
  });

  t.test('separate mode: the web port', async (t) => {
    await pingAndChannel(t, separate, separate.port('web'), false);
    t.equal(separate.route('web', 'web').connections, 3);
  });

  t.test('headless Chromium loads a page through the multiplexed port (post-quantum ClientHello)', async (t) => {
    const chromium = requirePeer(t, 'chromium', 'chromium');
    if (!chromium) return;
    const profile = await tempDir(t, 'chromium');
    const port = mux.port('multiplex');
    const before = mux.stats('multiplex');
    const result = await runClient(
      chromium,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--disable-quic',
        '--no-first-run',
        '--no-default-browser-check',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-extensions',
        '--no-proxy-server',
        `--user-data-dir=${profile}`,
        // The dev CA is not in Chromium's trust store; what is tested here is routing the hello.
        '--ignore-certificate-errors',
        // gate.test is not resolvable: Chromium maps it to loopback itself (SNI stays gate.test).
        '--host-resolver-rules=MAP gate.test 127.0.0.1',
        '--dump-dom',
        `https://gate.test:${port}/webapi/ping`,
      ],
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: profile }, timeoutMs: 90_000 },
    );
    t.equal(result.code, 0, describeResult(result));
    const dom = result.stdout.toString();
    t.match(dom, `"server_version":"${PROXY_VERSION}"`, "the page is the proxy's ping");
    const after = mux.stats('multiplex');
    t.ok((after.byRoute.web?.connections ?? 0) > (before.byRoute.web?.connections ?? 0), 'Chromium took the web route');
    t.ok(after.helloBytes.max > 1500, `Chromium's ClientHello was post-quantum sized (max ${after.helloBytes.max} bytes)`);
    const large = (s: typeof before): number =>
      Object.entries(s.helloBytes.histogram)
        .filter(([bucket]) => Number(bucket) > 1024)
        .reduce((n, [, count]) => n + count, 0);
    t.ok(large(after) > large(before), 'and it came in this run, not from curl');
  });
}
