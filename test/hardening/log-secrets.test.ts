/**
 * What is logged never carries a proxy password or a private key: a debug-level logger captures
 * every line while TLS-terminating routes fail in every way they can, and while the dialer goes
 * through a proxy URL with a password that answers 407 / refuses; the text must not contain them.
 */
import t from 'tap';
import { once } from 'node:events';
import { connect as tlsConnect } from 'node:tls';
import { createServer, type AddressInfo } from 'node:net';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, terminate } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { dial } from '../../lib/client/dial.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { closeServer, tcpClient, until } from '../helpers/net.js';
import { captureLogs } from './log-capture.js';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { joinProxy, renewIdentity } from '../../lib/tunnel/join-client.js';
import { startGateProxy } from '../helpers/gate-proxy.js';

const PASSWORD = 'hunter2-s3cret';

/** once() rejects on 'error'; these sockets are expected to fail, so wait for 'close' alone. */
const closed = (s: NodeJS.EventEmitter): Promise<void> => new Promise((resolve) => s.once('close', () => resolve()));

/** Key material that must never appear: a few base64 lines from the middle of the PEM. */
function keyFragments(pem: string): string[] {
  const lines = pem.split('\n').filter((l) => l && !l.startsWith('-----'));
  return [lines[2]!, lines[Math.floor(lines.length / 2)]!, 'PRIVATE KEY'];
}

t.test('multiplexer logs: TLS failures name codes and clients, never key material', async (t) => {
  const { server: pair } = devCertificates();
  const logs = captureLogs();
  const mux = new Multiplexer({
    logger: logs.logger,
    detectTimeoutMs: 200,
    routes: [
      {
        name: 'web',
        match: { sni: 'localhost' },
        handler: terminate(
          { ...pair, handshakeTimeoutMs: 200 },
          custom((s) => void s.end()),
        ),
      },
    ],
  });
  const { port } = await mux.listen({ port: 0 });
  // untrusted certificate (client aborts), unknown SNI (alert), garbage, silence in detection
  const untrusting = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost' });
  untrusting.on('error', () => {});
  await closed(untrusting);
  const unknown = tlsConnect({ host: '127.0.0.1', port, servername: 'nobody.test' });
  unknown.on('error', () => {});
  await closed(unknown);
  const garbage = await tcpClient(port);
  garbage.write('\x00\x01\x02 not a protocol');
  await once(garbage, 'close');
  const silent = await tcpClient(port);
  await once(silent, 'close');
  await until(() => mux.openConnections === 0, 'connections to settle');
  await mux.close({ graceMs: 50 });
  const codes = logs.lines.map((l) => l.code).filter(Boolean);
  t.same(
    new Set(codes),
    new Set(['GATE_ERR_TLS_HANDSHAKE', 'GATE_ERR_NO_ROUTE', 'GATE_ERR_UNKNOWN_PROTOCOL', 'GATE_ERR_DETECT_TIMEOUT']),
    'each failure was logged',
  );
  for (const fragment of keyFragments(pair.key)) t.notOk(logs.text().includes(fragment), `no key material (${fragment.slice(0, 12)}…)`);
});

t.test('dialer logs and errors: a proxy password is never shown', async (t) => {
  // A proxy that answers CONNECT with 407, and a closed port for an unreachable proxy.
  const proxy = createServer((s) => {
    s.on('error', () => {});
    s.once('data', () => s.end('HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n'));
  });
  // The proxy rules refuse a loopback proxy named 127.0.0.1 (Go's httpproxy); 127.0.0.2 is fine.
  proxy.listen(0, '127.0.0.2');
  await once(proxy, 'listening');
  t.teardown(() => closeServer(proxy));
  const proxyPort = (proxy.address() as AddressInfo).port;
  const gone = createServer();
  gone.listen(0, '127.0.0.2');
  await once(gone, 'listening');
  const gonePort = (gone.address() as AddressInfo).port;
  await closeServer(gone);

  const logs = captureLogs();
  const messages: string[] = [];
  for (const url of [
    `http://alice:${PASSWORD}@127.0.0.2:${proxyPort}`,
    `socks5h://alice:${PASSWORD}@127.0.0.2:${gonePort}`,
    `http://alice:${PASSWORD}@127.0.0.2:${gonePort}`,
  ]) {
    const err = await dial('example.test:443', { proxy: parseProxyUrl(url), logger: logs.logger, timeoutMs: 2000 }).then(
      () => undefined,
      (e: Error) => e,
    );
    t.ok(err, `dial via ${url.replace(PASSWORD, '***')} fails`);
    messages.push(`${err?.message} ${JSON.stringify(err)} ${String((err as { cause?: unknown })?.cause ?? '')}`);
  }
  t.ok(logs.lines.length > 0, 'the dialer did log');
  t.notOk(logs.text().includes(PASSWORD), 'no password in any log line');
  for (const m of messages) t.notOk(m.includes(PASSWORD), `no password in the error: ${m.slice(0, 80)}`);
});

t.test('agent joining: join tokens, agent keys and the CA key never reach a log line or an error', async (t) => {
  const staticToken = 'log-secret-static-token-0123456789';
  const logs = captureLogs();
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    auth: { join_tokens: [{ token: staticToken, agents: ['quiet'], max_uses: 1 }], development_token: true },
    logger: logs.logger,
  });
  const devToken = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  const caKey = await readFile(join(gate.dataDir, 'ca-key.pem'), 'utf8');
  const endpoint = { proxy: `127.0.0.1:${gate.port('multiplex')}`, serverName: 'localhost', env: {} };
  const pin = gate.proxy.caPin;
  const errors: string[] = [];
  const attempt = (p: Promise<unknown>): Promise<void> =>
    p.then(
      () => undefined,
      (e: Error) => void errors.push(`${e.message} ${JSON.stringify(e)}`),
    );
  const joined = await joinProxy(endpoint, { token: staticToken, name: 'quiet', caPin: pin });
  await attempt(joinProxy(endpoint, { token: staticToken, name: 'quiet', caPin: pin })); // exhausted
  await attempt(joinProxy(endpoint, { token: staticToken, name: 'loud', caPin: pin })); // name not allowed
  await attempt(joinProxy(endpoint, { token: `${devToken}x`, name: 'quiet', caPin: pin })); // unknown
  const renewed = await renewIdentity(endpoint, { ...joined, name: 'quiet' });
  t.equal(errors.length, 3, 'three refusals');
  t.ok(
    logs.lines.some((l) => l.component === 'agent-authority'),
    'the authority did log',
  );
  for (const secret of [staticToken, devToken, ...keyFragments(joined.key), ...keyFragments(renewed.key), ...keyFragments(caKey)]) {
    t.notOk(logs.text().includes(secret), `not in the log: ${secret.slice(0, 10)}…`);
    for (const e of errors) t.notOk(e.includes(secret), `not in an error: ${secret.slice(0, 10)}…`);
  }
});
