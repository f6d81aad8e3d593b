// New-connection setup through the connection upgrade, beside the direct route: a
// client dials a TLS route of one multiplexer the way `gate-mux local-proxy` and agents do
// (dialTls, mutual TLS against the development CA), either straight (the path to the proxy keeps
// TLS) or inside the upgrade (TLS to the web route, the WebSocket upgrade, then the route's TLS
// in binary messages), then sends one byte and waits for its echo. Client and proxy share this
// process (pinned by the runner), so the CPU figure is both ends of a connection. WARMUP
// connections per way first, unmeasured; then COUNT measured, one after another. One JSON line:
// {"count":..,"direct":{"p50Ms","p99Ms","cpuMsPerConn"},"upgraded":{...}}.
import { once } from 'node:events';
import { createServer as createHttpsServer } from 'node:https';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { ConnectionUpgrade, Multiplexer, custom, devCertificates, dialTls, serve, terminate } from '../lib/index.js';
import { median } from './stats.js';

const count = Math.max(1, Math.min(10_000, Number(process.env.COUNT ?? 300) || 300));
const warmup = Math.max(0, Math.min(1000, Number(process.env.WARMUP ?? 30) || 0));

const { ca, server, client } = devCertificates();
const web = createHttpsServer({ ...server });
const mux = new Multiplexer({
  routes: [
    {
      name: 'echo',
      match: { alpn: 'gate-bench' },
      handler: terminate(
        { ...server, ca: ca.cert, requestCert: true, alpnProtocols: ['gate-bench'] },
        custom((socket: Duplex) => {
          socket.pipe(socket);
        }),
      ),
    },
    { name: 'web', match: { alpn: 'http/1.1' }, handler: serve(web) },
  ],
});
const upgrade = new ConnectionUpgrade({ target: mux });
upgrade.attach(web);
const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });

async function measure(upgraded: boolean): Promise<{ p50Ms: number; p99Ms: number; cpuMsPerConn: number }> {
  const times: number[] = [];
  let cpu = 0;
  for (let i = 0; i < warmup + count; i++) {
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const { socket } = await dialTls(`127.0.0.1:${port}`, {
      alpn: ['gate-bench'],
      requireAlpn: true,
      serverName: 'localhost',
      ca: ca.cert,
      ...client,
      proxy: null,
      connectionUpgrade: { mode: upgraded, loadBalancerCa: ca.cert },
    });
    socket.write('x');
    await once(socket, 'data');
    const took = performance.now() - started;
    const used = process.cpuUsage(cpuBefore);
    const closed = once(socket, 'close');
    socket.destroy();
    await closed;
    if (i >= warmup) {
      times.push(took);
      cpu += (used.user + used.system) / 1000;
    }
  }
  const sorted = [...times].sort((a, b) => a - b);
  return {
    p50Ms: median(times),
    p99Ms: sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))]!,
    cpuMsPerConn: cpu / times.length,
  };
}

try {
  const direct = await measure(false);
  const upgraded = await measure(true);
  process.stdout.write(`${JSON.stringify({ count, direct, upgraded })}\n`);
} finally {
  upgrade.close();
  await mux.close({ graceMs: 500 });
}
process.exit(0);
