import { Multiplexer, forward, terminate, serve, select, custom } from 'gate-mux/mux';
import { createServer } from 'node:http';
import { createServer as createH2Server } from 'node:http2';
import { readFileSync } from 'node:fs';

const cert = { cert: readFileSync('server.pem'), key: readFileSync('server-key.pem') };
const hello = (req: { httpVersion: string }, res: { end(body: string): void }) => res.end(`hello over HTTP/${req.httpVersion}\n`);
const http1 = createServer(hello); // HTTP/1.1: TLS that chose http/1.1, and plaintext
const http2 = createH2Server().on('request', hello); // HTTP/2: TLS that chose h2, and plaintext prior knowledge
// After TLS, the protocol the client and this server agreed (ALPN) says which server speaks it.
const web = select((info) => (info.negotiatedAlpn === 'h2' ? serve(http2) : serve(http1)));
const audit = custom((socket, info) => void socket.end(`${info.remote.address}\n`)); // your own protocol

const mux = new Multiplexer({
  routes: [
    { name: 'kube', match: { sniPrefix: 'kube-gate-proxy-alpn.' }, handler: forward('10.0.0.5:443') }, // passthrough
    { name: 'ssh', match: { alpn: 'gate-proxy-ssh' }, handler: terminate(cert, forward('127.0.0.1:22')) },
    { name: 'postgres', match: { protocol: 'postgres' }, handler: terminate(cert, forward('127.0.0.1:5432')) },
    { name: 'ssh-plain', match: { protocol: 'ssh' }, handler: forward('127.0.0.1:22') },
    { name: 'audit', match: { alpn: 'x-audit' }, handler: terminate(cert, audit) },
    { name: 'web', match: { protocol: 'tls' }, handler: terminate({ ...cert, alpnProtocols: ['h2', 'http/1.1'] }, web) },
    { name: 'web-plain', match: { protocol: 'http1' }, handler: serve(http1) },
    { name: 'h2c', match: { protocol: 'h2' }, handler: serve(http2) },
    { name: 'mysql', match: { protocol: 'silent' }, handler: forward('127.0.0.1:3306') },
  ],
  detectTimeoutMs: 10_000, // one deadline for the whole detection phase
  idleTimeoutMs: 0, // routed connections: 0 = none
  maxConnections: 0, // 0 = what the open-file limit carries (shared by the process's multiplexers)
  fastPath: true, // passthrough on bare libuv handles (default); false = net.Socket throughout
});
const listener = { host: process.env.HOST ?? '0.0.0.0', port: Number(process.env.PORT ?? 443) };
const { port } = await mux.listen({ ...listener, silentRoute: 'mysql', silentAfterMs: 3000 });
console.log(`listening on port ${port}; try: curl -k https://localhost:${port}/`);
process.once('SIGINT', () => void mux.close({ graceMs: 10_000 }));
// ... mux.stats(), mux.setRoutes(newRoutes), mux.setOptions({ idleTimeoutMs: 3_600_000 })
