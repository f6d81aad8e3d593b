// The gate-mux bench router: a runnable peer for any harness. Raw TLS passthrough through the
// library's public API: SNI bench.local with ALPN gate-bench in the client's list goes to upstream
// A, everything else to upstream B. Listens on 127.0.0.1:LISTEN_PORT in the foreground until
// SIGTERM. WORKERS=n (n > 1) runs n worker processes on the one listener (node:cluster);
// CLUSTER_SCHEDULING=round-robin makes the primary hand out connections instead of the kernel.
// TERMINATE=1 ends the client's TLS here (certificate TLS_CERT, key TLS_KEY) and forwards the
// cleartext to upstreams that speak it: the `terminate` + `forward` route the tunnelled router is
// compared with (bench/tunnel-router.ts).
// gate-mux/mux, not the whole package: a router that only routes loads the multiplexer and pino,
// not the proxy's, agent's and cluster's dependencies (node-forge, ioredis, prom-client), whose
// code would be counted in its base memory.
import { Multiplexer, forward, runWorkers, terminate, type Handler } from 'gate-mux/mux';

function port(name: string): number {
  const value = Number(process.env[name]);
  if (!Number.isInteger(value) || value <= 0 || value > 65535) {
    process.stderr.write(`router: set ${name} to a TCP port (got '${process.env[name] ?? ''}')\n`);
    process.exit(2);
  }
  return value;
}

const listenPort = port('LISTEN_PORT');
const upstreamA = { host: '127.0.0.1', port: port('UPSTREAM_A_PORT') };
const upstreamB = { host: '127.0.0.1', port: port('UPSTREAM_B_PORT') };
const workers = Number(process.env.WORKERS ?? 1) || 1;
const tls = process.env.TERMINATE === '1' ? { key: process.env.TLS_KEY ?? '', cert: process.env.TLS_CERT ?? '' } : undefined;

function upstream(to: { host: string; port: number }, alpn?: string): Handler {
  return tls ? terminate({ ...tls, ...(alpn ? { alpnProtocols: [alpn] } : {}) }, forward(to)) : forward(to);
}

async function start(): Promise<void> {
  const mux = new Multiplexer({
    routes: [
      { name: 'bench', match: { sni: 'bench.local', alpn: 'gate-bench' }, handler: upstream(upstreamA, 'gate-bench') },
      { name: 'other', match: { protocol: ['tls', 'postgres', 'http1', 'h2', 'ssh'] }, handler: upstream(upstreamB) },
    ],
  });
  await mux.listen({ host: '127.0.0.1', port: listenPort, backlog: 4096 });
  process.once('SIGTERM', () => {
    void mux.close({ graceMs: 1000 }).then(() => process.exit(0));
  });
}

if (workers > 1) {
  const scheduling = process.env.CLUSTER_SCHEDULING === 'round-robin' ? 'round-robin' : 'shared';
  const role = await runWorkers({ workers, start, scheduling });
  if (role.role === 'primary') {
    process.stdout.write(`router listening on 127.0.0.1:${listenPort} with ${workers} workers\n`);
    await role.stopped;
  }
} else {
  await start();
  process.stdout.write(`router listening on 127.0.0.1:${listenPort}\n`);
}
