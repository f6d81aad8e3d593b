/**
 * `gate-mux local-proxy`: lets stock clients (psql, mysql, redis-cli, mongosh, ssh) reach a
 * service through the proxy's one port. Plain TCP on a local port is carried to the proxy inside
 * TLS with the protocol's ALPN, through HTTPS_PROXY / HTTP_PROXY unless NO_PROXY (or a loopback
 * target) says direct; a `-ping` ALPN's framing is unwrapped here.
 */
import { readFileSync } from 'node:fs';
import { parseAddress } from '../config/address.js';
import { proxyForTarget } from '../client/resolve-proxy.js';
import { startLocalProxy } from '../client/local-proxy.js';
import { loggerFromOptions } from './log.js';
import { parseCommand, usageError } from './usage.js';

export const LOCAL_PROXY_USAGE = `usage: gate-mux local-proxy --proxy HOST:PORT --alpn ALPN[,ALPN] (--ca FILE | --insecure)
                            [--listen HOST:PORT] [--server-name NAME] [--cert FILE --key FILE]
                            [--log-level LEVEL] [--log-format pretty|json]
       gate-mux local-proxy --proxy HOST:PORT --passthrough [--listen HOST:PORT]

  --proxy HOST:PORT     the proxy's shared port (gate.example.com:443)
  --alpn ALPN           e.g. gate-postgres, gate-mysql, gate-redis, gate-mongodb, gate-proxy-ssh
  --ca FILE             the proxy's CA certificate; or --insecure to skip verification (testing)
  --listen HOST:PORT    where local clients connect (default 127.0.0.1:0, a free port)
  --server-name NAME    SNI and certificate name (default: the proxy host)
  --cert, --key FILE    a client certificate for routes that ask for one
  --passthrough         carry the client's own TLS unchanged inside a connection upgrade, through
                        a load balancer that ends TLS (kubectl: its server name routes it). The
                        balancer's certificate is checked against the system store and
                        NODE_EXTRA_CA_CERTS. Through a balancer the other modes upgrade by
                        themselves; GATE_TLS_ROUTING_UPGRADE=true|false forces them.

Prints "listening on HOST:PORT -> ..." on stdout once ready; logs go to stderr.
SIGINT or SIGTERM close it.

  psql "host=127.0.0.1 port=PORT sslmode=disable user=alice"
`;

export async function main(argv: string[]): Promise<number> {
  const parsed = parseCommand(
    {
      args: argv,
      options: {
        listen: { type: 'string', default: '127.0.0.1:0' },
        proxy: { type: 'string' },
        alpn: { type: 'string' },
        'server-name': { type: 'string' },
        ca: { type: 'string' },
        insecure: { type: 'boolean', default: false },
        passthrough: { type: 'boolean', default: false },
        cert: { type: 'string' },
        key: { type: 'string' },
        'log-level': { type: 'string', default: process.env.LOG_LEVEL ?? 'warn' },
        'log-format': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    },
    LOCAL_PROXY_USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  if (values.help) {
    process.stdout.write(LOCAL_PROXY_USAGE);
    return 0;
  }
  if (!values.proxy) return usageError('--proxy (the proxy address) is required', LOCAL_PROXY_USAGE);
  if (!values.alpn && !values.passthrough) return usageError('--alpn is required', LOCAL_PROXY_USAGE);
  if (!values.ca && !values.insecure && !values.passthrough) return usageError('give --ca (the proxy CA) or --insecure', LOCAL_PROXY_USAGE);
  if ((values.cert === undefined) !== (values.key === undefined)) return usageError('--cert and --key go together', LOCAL_PROXY_USAGE);
  const listen = parseAddress(values.listen!, { allowZeroPort: true });
  if (!listen.ok) return usageError(`--listen ${values.listen}: ${listen.reason}`, LOCAL_PROXY_USAGE);
  const logger = loggerFromOptions(values['log-level']!, values['log-format'], 2);
  if (logger instanceof Error) return usageError(logger.message, LOCAL_PROXY_USAGE);
  const target = values.proxy;

  try {
    const via = proxyForTarget(target);
    const local = await startLocalProxy({
      listen: { host: listen.address.host, port: listen.address.port },
      target,
      alpn: (values.alpn ?? '')
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean),
      passthrough: values.passthrough,
      ...(values['server-name'] ? { serverName: values['server-name'] } : {}),
      ...(values.ca ? { ca: readFileSync(values.ca) } : {}),
      ...(values.cert ? { cert: readFileSync(values.cert) } : {}),
      ...(values.key ? { key: readFileSync(values.key) } : {}),
      insecure: values.insecure,
      logger,
    });
    const { address, port } = local.address();
    const carried = values.passthrough ? 'passthrough in the connection upgrade' : `ALPN ${values.alpn}`;
    console.log(`listening on ${address}:${port} -> ${target} (${carried}, ${via ? `via ${via.display}` : 'direct'})`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await local.close();
    return 0;
  } catch (err) {
    process.stderr.write(`gate-mux local-proxy: ${(err as { code?: string }).code ?? 'error'}: ${(err as Error).message}\n`);
    return 1;
  }
}
