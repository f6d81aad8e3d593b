import { ConnectionUpgrade, Multiplexer, forward, serve } from 'gate-mux';
import { createServer } from 'node:https';
import { readFileSync } from 'node:fs';

// The web server an L7 load balancer talks to: the balancer ended the client's TLS and opened its own.
const cert = { cert: readFileSync('server.pem'), key: readFileSync('server-key.pem') };
const myHttpsServer = createServer(cert, (_req, res) => res.end('web\n'));
const mux = new Multiplexer({
  routes: [
    // Routed by the ClientHello of the TLS inside the upgrade; here passed through to the database's TLS.
    { name: 'postgres', match: { alpn: 'gate-postgres' }, handler: forward(process.env.TARGET ?? '127.0.0.1:5432') },
    { name: 'web', match: { protocol: ['tls', 'http1'] }, handler: serve(myHttpsServer) },
  ],
});
const upgrade = new ConnectionUpgrade({ target: mux, trustedNetworks: ['10.0.0.0/8'] });
upgrade.attach(myHttpsServer); // GET /webapi/connectionupgrade → 101; other upgrade paths → 404
const { port } = await mux.listen({ host: process.env.HOST ?? '0.0.0.0', port: Number(process.env.PORT ?? 443) });
console.log(`listening on port ${port}`);
process.once('SIGINT', () => void mux.close({ graceMs: 1000 }).then(() => upgrade.close()));
