// A local proxy for stock clients (psql, mysql, redis-cli, mongosh...): plain TCP on a local
// port, carried to the multiplexer inside TLS with the protocol's ALPN, through the environment's
// HTTPS_PROXY / HTTP_PROXY unless NO_PROXY (or loopback) says direct.
//
//   npm run build && node dist/examples/local-proxy.js --listen 127.0.0.1:15432 \
//       --proxy gate.example.com:443 --alpn gate-postgres --ca ca.pem --server-name gate.example.com
//   psql "host=127.0.0.1 port=15432 sslmode=disable user=alice"
//
// Options: --listen host:port (default 127.0.0.1:0), --proxy host:port (the multiplexer),
// --alpn p1[,p2] (required), --server-name name, --ca file | --insecure, --cert file --key file.
// SIGINT / SIGTERM close it.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { proxyForTarget, startLocalProxy } from '../lib/client/index.js';

const { values } = parseArgs({
  options: {
    listen: { type: 'string', default: '127.0.0.1:0' },
    proxy: { type: 'string' },
    alpn: { type: 'string' },
    'server-name': { type: 'string' },
    ca: { type: 'string' },
    insecure: { type: 'boolean', default: false },
    cert: { type: 'string' },
    key: { type: 'string' },
  },
});

function usage(message: string): never {
  console.error(`${message}\nusage: local-proxy --proxy host:port --alpn gate-postgres [--listen 127.0.0.1:15432] [--server-name name] [--ca file | --insecure] [--cert file --key file]`);
  process.exit(2);
}

if (!values.proxy) usage('--proxy (the multiplexer address) is required');
if (!values.alpn) usage('--alpn is required');
if (!values.ca && !values.insecure) usage('give --ca (the multiplexer CA) or --insecure');
// host:port or [v6]:port; port 0 picks a free one.
const listenMatch = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(values.listen);
if (!listenMatch) usage(`--listen ${values.listen}: expected host:port`);
const listen = { host: listenMatch[1] ?? '127.0.0.1', port: Number(listenMatch[2]) };
const target = values.proxy;
const logger = pino({ level: process.env.LOG_LEVEL ?? 'warn' }, pino.destination(2));

try {
  const via = proxyForTarget(target);
  const local = await startLocalProxy({
    listen,
    target,
    alpn: values.alpn.split(',').map((p) => p.trim()).filter(Boolean),
    ...(values['server-name'] ? { serverName: values['server-name'] } : {}),
    ...(values.ca ? { ca: readFileSync(values.ca) } : {}),
    ...(values.cert ? { cert: readFileSync(values.cert) } : {}),
    ...(values.key ? { key: readFileSync(values.key) } : {}),
    insecure: values.insecure,
    logger,
  });
  const { address, port } = local.address();
  console.log(`listening on ${address}:${port} -> ${target} (ALPN ${values.alpn}, ${via ? `via ${via.display}` : 'direct'})`);
  const stop = (): void => {
    void local.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
} catch (err) {
  console.error(`local-proxy: ${(err as { code?: string }).code ?? 'error'}: ${(err as Error).message}`);
  process.exit(1);
}
