/**
 * Real peers: curl sends a v1 header; HAProxy accepts our encoded headers (accept-proxy) and relays
 * the client it read to us in its own v1 / v2+CRC32C header (send-proxy / send-proxy-v2), so one
 * round trip checks our encoders against HAProxy's parser and our parser against HAProxy's encoder.
 * Needs: haproxy, curl (Debian packages haproxy, curl). Loopback only.
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { encodeProxyHeaderV1, encodeProxyHeaderV2, parseProxyHeader, PP2_TYPE, type ProxyHeader } from '../../lib/proxy-protocol/header.js';
import { requirePeer } from '../helpers/peers.js';
import { startHaproxy } from '../helpers/haproxy.js';

/** A server that reads one PROXY header per connection and reports it. */
async function headerSink(t: Test): Promise<{ port: number; next: () => Promise<ProxyHeader> }> {
  const waiting: Array<(h: ProxyHeader) => void> = [];
  const ready: ProxyHeader[] = [];
  const server: Server = createServer((socket: Socket) => {
    let buf = Buffer.alloc(0);
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const r = parseProxyHeader(buf);
      if (r.status === 'need') return;
      socket.destroy();
      const w = waiting.shift();
      if (w) w(r.header);
      else ready.push(r.header);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  return {
    port: (server.address() as AddressInfo).port,
    next: () => {
      const h = ready.shift();
      return h ? Promise.resolve(h) : new Promise((resolve) => waiting.push(resolve));
    },
  };
}

function peer(t: Test, binary: string, debianPackage: string): string | undefined {
  return requirePeer(t, binary, debianPackage);
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function waitListening(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const c = connect(port, '127.0.0.1');
      c.on('connect', () => {
        c.destroy();
        resolve(true);
      });
      c.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

t.test('curl --haproxy-protocol sends a v1 header we parse', async (t) => {
  const curl = peer(t, 'curl', 'curl');
  if (!curl) return;
  const sink = await headerSink(t);
  const child = spawn(curl, ['-sS', '--max-time', '5', '--haproxy-protocol', `http://127.0.0.1:${sink.port}/`], { stdio: 'ignore' });
  t.teardown(() => child.kill('SIGKILL'));
  const h = await sink.next();
  t.match(h, {
    version: 1,
    command: 'proxy',
    transport: 'tcp4',
    source: { address: '127.0.0.1', family: 'IPv4' },
    destination: { address: '127.0.0.1', port: sink.port },
  });
});

t.test('HAProxy accepts our headers and relays the client in its own v1 and v2+CRC32C headers', async (t) => {
  const haproxy = peer(t, 'haproxy', 'haproxy');
  if (!haproxy) return;
  const sink = await headerSink(t);
  const [v1In, v2In] = [await freePort(), await freePort()];
  const daemon = await startHaproxy(
    t,
    haproxy,
    [
      // our v2 header in, HAProxy's v1 header out
      `listen v2_to_v1`,
      `  bind 127.0.0.1:${v2In} accept-proxy`,
      `  server sink 127.0.0.1:${sink.port} send-proxy`,
      // our v1 header in, HAProxy's v2 header with a CRC32C TLV out
      `listen v1_to_v2`,
      `  bind 127.0.0.1:${v1In} accept-proxy`,
      `  server sink 127.0.0.1:${sink.port} send-proxy-v2 proxy-v2-options crc32c`,
    ],
    { host: '127.0.0.1', port: v1In },
  );
  await waitListening(v2In);
  // the probes above were connections without headers: HAProxy drops them without a backend call

  const send = (port: number, header: Buffer): Socket => {
    const c = connect(port, '127.0.0.1', () => c.write(Buffer.concat([header, Buffer.from('hello')])));
    c.on('error', () => {});
    t.teardown(() => c.destroy());
    return c;
  };

  const src6 = { address: '2001:db8::7', port: 40001, family: 'IPv6' as const };
  const dst6 = { address: 'fd00::443', port: 443, family: 'IPv6' as const };
  send(v2In, encodeProxyHeaderV2(src6, dst6, [{ type: PP2_TYPE.AUTHORITY, value: Buffer.from('gate.test') }], { crc32c: true }));
  const viaV1 = await sink.next();
  t.match(viaV1, { version: 1, transport: 'tcp6', source: src6, destination: dst6 }, `HAProxy read our v2 header ${daemon.output()}`);

  const src4 = { address: '10.9.8.7', port: 1234, family: 'IPv4' as const };
  const dst4 = { address: '10.0.0.1', port: 5432, family: 'IPv4' as const };
  send(v1In, encodeProxyHeaderV1(src4, dst4));
  const viaV2 = await sink.next();
  t.match(viaV2, { version: 2, transport: 'tcp4', source: src4, destination: dst4 }, `HAProxy read our v1 header ${daemon.output()}`);
  t.ok(
    viaV2.tlvs.some((x) => x.type === PP2_TYPE.CRC32C),
    'HAProxy sent a CRC32C TLV, and it verified',
  );
});
