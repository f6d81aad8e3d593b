// The tunnelled bench router, measured against the direct route: the proxy ends the client's TLS (as
// the `terminate` + `forward` router does with TERMINATE=1, bench/router.ts) and carries the
// cleartext to upstream A through an agent's reverse tunnel: one tunnel stream (the framing, or HTTP/2) per client
// connection in the session the agent (a child process, bench/tunnel-side.ts) holds open over
// mutual TLS. Everything else goes to B, terminated and forwarded, so the runner's routing check
// reads the same A/B answers as from every other router. Upstreams are cleartext (upstream.ts
// PLAIN=1); TLS_KEY/TLS_CERT are the certificate the proxy presents to clients. LISTEN_PORT opens
// only once the agent is registered, so the first routing check finds it up.
import { Multiplexer, forward, terminate, viaTunnel } from '../lib/index.js';
import { envPort } from './env-port.js';
import { BENCH_AGENT, startTunnelSide } from './tunnel-side.js';

const port = (name: string): number => envPort('tunnel-router', name);

const listenPort = port('LISTEN_PORT');
const targetA = `127.0.0.1:${port('UPSTREAM_A_PORT')}`;
const upstreamB = { host: '127.0.0.1', port: port('UPSTREAM_B_PORT') };
const tls = { key: process.env.TLS_KEY ?? '', cert: process.env.TLS_CERT ?? '' };
const side = await startTunnelSide(targetA);

const mux = new Multiplexer({
  routes: [
    {
      name: 'bench',
      match: { sni: 'bench.local', alpn: 'gate-bench' },
      handler: terminate({ ...tls, alpnProtocols: ['gate-bench'] }, viaTunnel(side.registry, BENCH_AGENT, targetA)),
    },
    { name: 'other', match: { protocol: 'tls' }, handler: terminate(tls, forward(upstreamB)) },
  ],
});
await mux.listen({ host: '127.0.0.1', port: listenPort, backlog: 4096 });
process.stdout.write(`tunnel router listening on 127.0.0.1:${listenPort} (agent via 127.0.0.1:${side.tunnelPort})\n`);
process.once('SIGTERM', () => {
  void Promise.all([mux.close({ graceMs: 1000 }), side.close()]).then(() => process.exit(0));
});
