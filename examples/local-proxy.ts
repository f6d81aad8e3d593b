// A local proxy for one stock client, from the library: psql connects to 127.0.0.1:15432 in
// plain TCP, and each connection is carried to the proxy inside TLS with the Postgres ALPN,
// through HTTPS_PROXY / HTTP_PROXY unless NO_PROXY says direct. `npx gate-mux local-proxy` is
// the full command (any ALPN, client certificates, log options).
//
//   npm run build && node dist/examples/local-proxy.js gate.example.com:443 ca.pem
//   psql "host=127.0.0.1 port=15432 sslmode=disable user=alice"
import { readFileSync } from 'node:fs';
import { ALPN_POSTGRES } from 'gate-mux/wire';
import { proxyForTarget, startLocalProxy } from 'gate-mux/client';

const [target = 'gate.example.com:443', caFile = 'ca.pem'] = process.argv.slice(2);

const local = await startLocalProxy({
  listen: { host: '127.0.0.1', port: 15432 },
  target,
  alpn: [ALPN_POSTGRES],
  ca: readFileSync(caFile),
});
const via = proxyForTarget(target);
console.log(`127.0.0.1:${local.address().port} -> ${target} ${via ? `via ${via.display}` : 'direct'}`);
process.once('SIGINT', () => void local.close());
