// Dial the proxy's reverse-tunnel endpoint the way an agent does: honour HTTPS_PROXY /
// HTTP_PROXY / NO_PROXY, open TLS with ALPN gate-reversetunnel, and report which way it went.
//
//   npm run build && HTTPS_PROXY=http://squid.corp:3128 node dist/examples/agent.js \
//       --proxy gate.example.com:443 --ca ca.pem [--server-name gate.example.com] [--timeout-ms 10000]
//
// Prints e.g. `connected to gate.example.com:443 via http://squid.corp:3128 (from HTTPS_PROXY),
// ALPN gate-reversetunnel` — the proxy shown redacted — and exits 0; on failure prints the error
// code and message and exits 1.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { dialTls } from '../lib/client/index.js';

const { values } = parseArgs({
  options: {
    proxy: { type: 'string' },
    'server-name': { type: 'string' },
    ca: { type: 'string' },
    insecure: { type: 'boolean', default: false },
    'timeout-ms': { type: 'string', default: '10000' },
  },
});

if (!values.proxy) {
  console.error('usage: agent --proxy host:port [--ca file | --insecure] [--server-name name] [--timeout-ms n]');
  process.exit(2);
}

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
