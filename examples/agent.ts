// An agent: dial the proxy's reverse-tunnel endpoint the way agents do (HTTPS_PROXY / HTTP_PROXY /
// NO_PROXY, TLS with ALPN gate-reversetunnel), report which way it went, and — given a client
// certificate — hold the tunnel so the proxy can reach the resources this agent serves.
//
// Report the route and exit (no certificate):
//   npm run build && HTTPS_PROXY=http://squid.corp:3128 node dist/examples/agent.js \
//       --proxy gate.example.com:443 --ca ca.pem [--server-name gate.example.com] [--timeout-ms 10000]
// prints e.g. `connected to gate.example.com:443 via http://squid.corp:3128 (from HTTPS_PROXY),
// ALPN gate-reversetunnel` — the proxy shown redacted — and exits 0; on failure prints the error
// code and message and exits 1.
//
// Hold a tunnel (a certificate issued by the proxy's CA with CN = the agent's name):
//   node dist/examples/agent.js --proxy gate.example.com:443 --ca ca.pem \
//       --name db-agent --cert agent.pem --key agent-key.pem --allow 10.0.0.5:5432 [--allow host:port ...]
// prints `tunnel up: agent db-agent via <route> (connection N)` each time the tunnel comes up and
// `tunnel down: <reason>` when it drops (it reconnects with backoff); SIGTERM or Ctrl-C stops it.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { dialTls } from '../lib/client/index.js';
import { startAgent, type AgentConnectedEvent } from '../lib/tunnel/agent.js';

const { values } = parseArgs({
  options: {
    proxy: { type: 'string' },
    'server-name': { type: 'string' },
    ca: { type: 'string' },
    insecure: { type: 'boolean', default: false },
    'timeout-ms': { type: 'string', default: '10000' },
    name: { type: 'string' },
    cert: { type: 'string' },
    key: { type: 'string' },
    allow: { type: 'string', multiple: true, default: [] },
  },
});

if (!values.proxy) {
  console.error('usage: agent --proxy host:port [--ca file | --insecure] [--server-name name] [--timeout-ms n]');
  console.error('       agent --proxy host:port --ca file --name agent --cert file --key file --allow host:port [--allow ...]');
  process.exit(2);
}

if (values.cert) {
  if (!values.key || !values.name || !values.ca) {
    console.error('agent: holding a tunnel needs --name, --cert, --key and --ca');
    process.exit(2);
  }
  try {
    const agent = startAgent({
      proxy: values.proxy,
      name: values.name,
      cert: readFileSync(values.cert),
      key: readFileSync(values.key),
      ca: readFileSync(values.ca),
      resources: values.allow ?? [],
      ...(values['server-name'] ? { serverName: values['server-name'] } : {}),
      dialTimeoutMs: Number(values['timeout-ms']),
    });
    agent.on('connected', (e: AgentConnectedEvent) => console.log(`tunnel up: agent ${agent.name} via ${e.via} (connection ${e.connections})`));
    agent.on('disconnected', (e: { reason: string }) => console.log(`tunnel down: ${e.reason}`));
    const stop = (): void => {
      void agent.stop().then(() => process.exit(0));
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  } catch (err) {
    console.error(`agent: ${(err as { code?: string }).code ?? 'error'}: ${(err as Error).message}`);
    process.exit(1);
  }
} else {
  try {
    const { socket, via, alpn } = await dialTls(values.proxy, {
      alpn: ['gate-reversetunnel'],
      requireAlpn: true,
      ...(values['server-name'] ? { serverName: values['server-name'] } : {}),
      ...(values.ca ? { ca: readFileSync(values.ca) } : {}),
      rejectUnauthorized: !values.insecure,
      timeoutMs: Number(values['timeout-ms']),
    });
    console.log(`connected to ${values.proxy} ${via ? `via ${via.display} (from ${via.source})` : 'direct'}, ALPN ${alpn ?? 'none'}`);
    socket.end();
  } catch (err) {
    console.error(`agent: ${(err as { code?: string }).code ?? 'error'}: ${(err as Error).message}`);
    process.exit(1);
  }
}
