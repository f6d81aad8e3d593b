// Routing by SNI and ALPN to two upstreams, on one port.
//
//   npm run build && node dist/examples/sni-alpn-router.js [--port 8443]
//
// Starts two demo TLS upstreams (A and B) on ephemeral loopback ports, then a multiplexer that
// passes TLS through untouched: SNI a.gate.test -> A; ALPN gate-postgres anywhere in the client's
// list -> B; anything else is refused with a TLS alert. It prints openssl commands to try.
import { createServer, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { Multiplexer, forward, devCertificates } from 'gate-mux';
import { pino } from 'pino';

const portArg = process.argv.indexOf('--port');
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 8443;
const { server: keyPair } = devCertificates();

async function demoUpstream(name: string): Promise<number> {
  const server = createServer({ ...keyPair, ALPNProtocols: ['gate-postgres', 'h2', 'http/1.1'] }, (socket: TLSSocket) => {
    socket.end(`upstream ${name}: sni=${socket.servername || '-'} alpn=${socket.alpnProtocol || '-'}\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.once('SIGINT', () => server.close());
  return (server.address() as AddressInfo).port;
}

const [a, b] = await Promise.all([demoUpstream('A'), demoUpstream('B')]);
const mux = new Multiplexer({
  logger: pino({ level: 'info' }),
  routes: [
    { name: 'a', match: { sni: 'a.gate.test' }, handler: forward({ host: '127.0.0.1', port: a }) },
    { name: 'b', match: { alpn: 'gate-postgres' }, handler: forward({ host: '127.0.0.1', port: b }) },
  ],
});
const bound = await mux.listen({ host: '127.0.0.1', port });
console.log(`routing on 127.0.0.1:${bound.port}; try:
  openssl s_client -connect 127.0.0.1:${bound.port} -servername a.gate.test -quiet </dev/null      # -> A
  openssl s_client -connect 127.0.0.1:${bound.port} -alpn h2,gate-postgres -quiet </dev/null       # -> B
  openssl s_client -connect 127.0.0.1:${bound.port} -servername other.test </dev/null             # alert: unrecognized name`);
process.once('SIGINT', () => {
  void mux.close({ graceMs: 1000 }).then(() => console.log('stats', JSON.stringify(mux.stats())));
});
