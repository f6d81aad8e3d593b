/**
 * PROXY protocol at the multiplexer: mode on requires a header from trusted networks only, the
 * header's client becomes info.remote (also in logs, also for per-source limits), a second header
 * is refused, v2 LOCAL keeps the socket's addresses, TLVs reach the handler; forward() sends v1/v2
 * headers to an upstream that parses them.
 */
import t from 'tap';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, forward } from '../../lib/handlers/builders.js';
import {
  encodeProxyHeaderV1,
  encodeProxyHeaderV2,
  encodeProxyHeaderV2Local,
  parseProxyHeader,
  PP2_TYPE,
  type ProxyHeader,
} from '../../lib/proxy-protocol/header.js';
import type { ConnectionInfo } from '../../lib/handlers/types.js';
import type { MultiplexerOptions } from '../../lib/mux/types.js';
import { closeServer, readUntil, tcpClient, until } from '../helpers/net.js';
import { captureLogs } from './log-capture.js';

const client4 = { address: '203.0.113.7', port: 51000, family: 'IPv4' as const };
const front4 = { address: '198.51.100.1', port: 443, family: 'IPv4' as const };
const client6 = { address: '2001:db8::42', port: 40404, family: 'IPv6' as const };
const front6 = { address: '2001:db8::1', port: 443, family: 'IPv6' as const };

/** An SSH route whose custom handler answers with what it knows about the connection, as JSON. */
const infoRoute = {
  name: 'ssh',
  match: { protocol: 'ssh' as const },
  handler: custom((socket, info) => {
    socket.resume(); // read to EOF so the client closing is noticed
    socket.end(JSON.stringify(summary(info)) + '\n');
  }),
};

function summary(info: ConnectionInfo): Record<string, unknown> {
  return {
    remote: info.remote,
    local: info.local,
    command: info.proxyHeader?.command,
    version: info.proxyHeader?.version,
    tlvs: info.proxyHeader?.tlvs.map((x) => [x.type, x.value.toString()]),
  };
}

async function withMux(options: Partial<MultiplexerOptions>, fn: (port: number, mux: Multiplexer) => Promise<void>): Promise<void> {
  const mux = new Multiplexer({ routes: [infoRoute], proxyProtocol: { mode: 'on', trusted: ['127.0.0.0/8'] }, ...options });
  const { port } = await mux.listen({ port: 0 });
  try {
    await fn(port, mux);
  } finally {
    await mux.close({ graceMs: 50 });
  }
}

async function ask(port: number, ...writes: Buffer[]): Promise<Record<string, unknown>> {
  const socket = await tcpClient(port);
  for (const w of writes) {
    socket.write(w);
    await new Promise((r) => setImmediate(r));
  }
  const text = await readUntil(socket, (s) => s.endsWith('\n'));
  socket.destroy();
  return JSON.parse(text) as Record<string, unknown>;
}

/** Writes, then waits for the multiplexer to close the connection; returns what came back. */
async function refused(port: number, bytes: Buffer): Promise<string> {
  const socket = await tcpClient(port);
  let got = '';
  socket.on('data', (d: Buffer) => (got += d.toString()));
  socket.on('error', () => {});
  socket.write(bytes);
  await once(socket, 'close');
  return got;
}

const ssh = Buffer.from('SSH-2.0-client\r\n');

t.test('v1 and v2 headers: the header client becomes info.remote and info.local', async (t) => {
  await withMux({}, async (port) => {
    t.match(await ask(port, encodeProxyHeaderV1(client4, front4), ssh), { remote: client4, local: front4, command: 'proxy', version: 1 });
    t.match(await ask(port, encodeProxyHeaderV2(client6, front6), ssh), { remote: client6, local: front6, command: 'proxy', version: 2 });
    // The header split over several segments (a byte at a time) is reassembled.
    const header = encodeProxyHeaderV2(client4, front4, [], { crc32c: true });
    const pieces = [...header].map((b) => Buffer.from([b]));
    t.match(await ask(port, ...pieces, ssh), { remote: client4, version: 2 }, 'dribbled v2 header with CRC32C');
  });
});

t.test('v2 TLVs reach the handler; v2 LOCAL keeps the socket addresses', async (t) => {
  await withMux({}, async (port) => {
    const tlvs = [
      { type: PP2_TYPE.AUTHORITY, value: Buffer.from('gate.test') },
      { type: 0xe0, value: Buffer.from('custom') },
    ];
    const got = await ask(port, encodeProxyHeaderV2(client4, front4, tlvs), ssh);
    t.same(got.tlvs, [
      [PP2_TYPE.AUTHORITY, 'gate.test'],
      [0xe0, 'custom'],
    ]);
    const local = await ask(port, encodeProxyHeaderV2Local(), ssh);
    t.match(
      local,
      { command: 'local', remote: { address: '127.0.0.1' }, local: { address: '127.0.0.1', port } },
      'LOCAL: own addresses stand',
    );
  });
});

t.test('mode on: no header, a malformed one, a second one or one from an untrusted source are refused', async (t) => {
  await withMux({}, async (port, mux) => {
    await refused(port, ssh);
    await refused(port, Buffer.from('PROXY TCP4 203.0.113.300 198.51.100.1 1 2\r\nSSH-2.0-x\r\n'));
    await refused(port, Buffer.concat([encodeProxyHeaderV1(client4, front4), encodeProxyHeaderV2(client6, front6), ssh]));
    await refused(port, Buffer.concat([encodeProxyHeaderV1(client4, front4), encodeProxyHeaderV1(client4, front4), ssh]));
    await until(() => mux.openConnections === 0, 'connections to settle');
    const { failures } = mux.stats();
    t.equal(failures.GATE_ERR_PROXY_HEADER_MISSING, 1, 'no header');
    t.equal(failures.GATE_ERR_PROXY_HEADER_MALFORMED, 1, 'bad address');
    t.equal(failures.GATE_ERR_PROXY_HEADER_REFUSED, 2, 'second header (v2 after v1, v1 after v1)');
    t.same(mux.stats().byRoute, {}, 'nothing was routed');
  });
  await withMux({ proxyProtocol: { mode: 'on', trusted: ['10.0.0.0/8', '192.168.1.10', 'fd00::/8'] } }, async (port, mux) => {
    await refused(port, Buffer.concat([encodeProxyHeaderV1(client4, front4), ssh]));
    await until(() => mux.stats().rejected === 1, 'the rejection');
    t.equal(mux.stats().failures.GATE_ERR_PROXY_HEADER_REFUSED, 1, 'untrusted 127.0.0.1 refused at accept');
  });
});

t.test('mode off (default): any header is refused', async (t) => {
  await withMux({ proxyProtocol: { mode: 'off' } }, async (port, mux) => {
    await refused(port, Buffer.concat([encodeProxyHeaderV2(client4, front4), ssh]));
    await refused(port, Buffer.concat([encodeProxyHeaderV1(client4, front4), ssh]));
    await until(() => mux.openConnections === 0, 'connections to settle');
    t.equal(mux.stats().failures.GATE_ERR_PROXY_HEADER_REFUSED, 2);
  });
});

t.test('a detection failure after the header logs the header client, not the balancer', async (t) => {
  const logs = captureLogs();
  await withMux({ logger: logs.logger, detectTimeoutMs: 100 }, async (port, mux) => {
    const socket = await tcpClient(port);
    socket.write(Buffer.concat([encodeProxyHeaderV1(client4, front4), Buffer.from([0x16, 0x03, 0x01])]));
    await once(socket, 'close');
    await until(() => mux.openConnections === 0, 'connections to settle');
    await refused(port, Buffer.concat([encodeProxyHeaderV2(client6, front6), Buffer.from('\x00garbage\r\n')]));
    await until(() => mux.openConnections === 0, 'connections to settle');
  });
  const failures = logs.lines.filter((l) => l.code !== undefined);
  t.same(
    failures.map((l) => [l.code, l.remote]),
    [
      ['GATE_ERR_DETECT_TIMEOUT', client4.address],
      ['GATE_ERR_UNKNOWN_PROTOCOL', client6.address],
    ],
  );
  t.notOk(logs.text().includes('"remote":"127.0.0.1"'), 'the balancer address is in no failure line');
});

t.test('maxConnectionsPerSource with PROXY on counts the header client, once the header is read', async (t) => {
  await withMux({ maxConnectionsPerSource: 2 }, async (port, mux) => {
    const open: Socket[] = [];
    // Two connections from client4 stay in detection (header read, no greeting yet).
    for (let i = 0; i < 2; i++) {
      const s = await tcpClient(port);
      s.write(encodeProxyHeaderV1({ ...client4, port: 50000 + i }, front4));
      open.push(s);
    }
    await refused(port, Buffer.concat([encodeProxyHeaderV1({ ...client4, port: 50009 }, front4), ssh]));
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_FROM_SOURCE, 1, 'the third from 203.0.113.7 is refused');
    // Another client behind the same balancer (same socket peer 127.0.0.1) is still served.
    t.match(await ask(port, encodeProxyHeaderV1(client6, front6), ssh), { remote: client6 });
    // When one of the two goes, client4 may connect again.
    open.pop()!.destroy();
    await until(() => mux.openConnections === 1, 'the slot to free');
    t.match(await ask(port, encodeProxyHeaderV1(client4, front4), ssh), { remote: client4 });
    for (const s of open) s.destroy();
  });
});

/** An upstream that parses the PROXY header it is sent, then reports it and what followed. */
async function headerUpstream(): Promise<{
  port: number;
  close: () => Promise<void>;
  next: () => Promise<{ header: ProxyHeader; rest: string }>;
}> {
  const results: Array<{ header: ProxyHeader; rest: string }> = [];
  const server = createServer((socket) => {
    let buf = Buffer.alloc(0);
    socket.on('error', () => {});
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const r = parseProxyHeader(buf);
      if (r.status === 'need') return;
      const rest = buf.subarray(r.header.length).toString();
      if (!rest.includes('\n')) return;
      results.push({ header: r.header, rest });
      socket.end('ok\n');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    close: () => closeServer(server),
    next: async () => {
      await until(() => results.length > 0, 'the upstream to read a header');
      return results.shift()!;
    },
  };
}

t.test('forward sendProxyHeader v1/v2: the upstream parses the client before any client byte', async (t) => {
  const up = await headerUpstream();
  t.teardown(up.close);
  for (const version of ['v1', 'v2'] as const) {
    // Plain listener: the header names the socket peer and the listener address.
    const plain = new Multiplexer({
      routes: [
        { name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: up.port }, { sendProxyHeader: version }) },
      ],
    });
    const { port: plainPort } = await plain.listen({ port: 0 });
    const c1 = await tcpClient(plainPort);
    c1.write(ssh);
    await readUntil(c1, (s) => s.includes('ok'));
    const got1 = await up.next();
    t.match(
      got1.header,
      {
        version: version === 'v1' ? 1 : 2,
        source: { address: '127.0.0.1', port: c1.localPort },
        destination: { address: '127.0.0.1', port: plainPort },
      },
      `${version} from a direct client`,
    );
    t.equal(got1.rest, ssh.toString(), 'client bytes follow the header, unaltered');
    c1.destroy();
    await plain.close({ graceMs: 50 });

    // Behind a balancer: the header sent upstream names the client of the header received.
    const chained = new Multiplexer({
      routes: [
        { name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: up.port }, { sendProxyHeader: version }) },
      ],
      proxyProtocol: { mode: 'on', trusted: ['127.0.0.1'] },
    });
    const { port: chainedPort } = await chained.listen({ port: 0 });
    const c2 = await tcpClient(chainedPort);
    c2.write(Buffer.concat([encodeProxyHeaderV2(client6, front6), ssh]));
    await readUntil(c2, (s) => s.includes('ok'));
    const got2 = await up.next();
    t.match(got2.header, { source: client6, destination: front6 }, `${version} relays the header client`);
    c2.destroy();
    await chained.close({ graceMs: 50 });
  }
});
