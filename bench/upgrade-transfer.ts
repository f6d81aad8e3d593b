// The connection upgrade's per-byte cost alone, in one process: BYTES go from a client to a server
// over TLS, either straight over TCP or inside the upgrade (TLS to an HTTPS server, the WebSocket
// upgrade, the inner TLS in binary messages: openUpgrade and ConnectionUpgrade, the code agents and
// the proxy run), client to server as an agent's tunnel carries a download. No HTTP/2, no agent,
// no relay: what is left is the extra layer, so a change to it shows without the tunnel's noise.
// Both ends share the process, so the CPU figure is client + server. WAYS (default
// direct,upgraded) may add `cleartext`: the upgrade over plain HTTP, no outer TLS at either end.
// ROUNDS rounds per way, alternating; one JSON line:
// {"bytes":..,"direct":{"cpuSecondsPerGB","mbPerSecond"},"upgraded":{...},"cleartext":{...}}
// (medians). Under valgrind it counts instructions instead, which repeat to within about 1 % on a
// busy machine: with CALLGRIND=1 the counters are dumped (which zeroes them) before the last round
// and after it (callgrind_control -d), so the `summary:` line of the second dump, `<file>.2`, is
// that round alone:
//   BYTES=33554432 ROUNDS=2 WAYS=upgraded CALLGRIND=1 valgrind --tool=callgrind \
//     --smc-check=all-non-file --callgrind-out-file=/tmp/cg.%p node dist/bench/upgrade-transfer.js
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect as netConnect, type AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, createServer as createTlsServer, TLSSocket } from 'node:tls';
import { WebSocket } from 'ws';
import { ConnectionUpgrade, devCertificates } from '../lib/index.js';
import { openUpgrade } from '../lib/conn-upgrade/upgrade-client.js';
import { WebSocketStream } from '../lib/conn-upgrade/websocket-stream.js';
import { CONNECTION_UPGRADE_PATH, UPGRADE_PROTOCOL_ALPN } from '../lib/wire/names.js';
import { median } from './stats.js';

const bytes = Math.max(2 ** 20, Math.min(2 ** 32, Number(process.env.BYTES ?? 256 * 2 ** 20) || 256 * 2 ** 20));
const rounds = Math.max(1, Math.min(20, Number(process.env.ROUNDS ?? 5) || 5));
type Way = 'direct' | 'upgraded' | 'cleartext';
const ways = (process.env.WAYS ?? 'direct,upgraded').split(',') as Way[];
const CHUNK = 64 * 1024;

const { ca, server } = devCertificates();
const received = new Set<(n: number) => void>();
const count = (socket: Duplex): void => {
  socket.on('data', (chunk: Buffer) => {
    for (const take of received) take(chunk.length);
  });
};

const direct = createTlsServer({ ...server }, count);
direct.listen(0, '127.0.0.1');
await once(direct, 'listening');
const web = createHttpsServer({ ...server });
const upgrade = new ConnectionUpgrade({
  target: {
    accept: (stream) => {
      count(new TLSSocket(stream, { isServer: true, ...server }));
      return true;
    },
  },
});
upgrade.attach(web);
web.listen(0, '127.0.0.1');
await once(web, 'listening');
// `cleartext`: the upgrade over plain HTTP, as from a balancer that talks HTTP to the proxy on a
// private network (the client's TLS to the balancer is then the balancer's cost, not ours).
const plain = createHttpServer();
upgrade.attach(plain);
plain.listen(0, '127.0.0.1');
await once(plain, 'listening');

async function carrierFor(way: Way): Promise<Duplex> {
  if (way === 'cleartext') {
    const { port } = plain.address() as AddressInfo;
    const ws = new WebSocket(`ws://127.0.0.1:${port}${CONNECTION_UPGRADE_PATH}`, [UPGRADE_PROTOCOL_ALPN], { perMessageDeflate: false });
    await once(ws, 'open');
    return new WebSocketStream(ws);
  }
  const port = ((way === 'direct' ? direct : web).address() as AddressInfo).port;
  const raw = netConnect(port, '127.0.0.1');
  await once(raw, 'connect');
  return way === 'direct'
    ? raw
    : await openUpgrade(raw, { authority: `127.0.0.1:${port}`, servername: 'localhost', ca: ca.cert, timeoutMs: 10_000 });
}

async function open(way: Way): Promise<Duplex> {
  const carrier = await carrierFor(way);
  const tls = tlsConnect({ socket: carrier, servername: 'localhost', ca: ca.cert });
  await once(tls, 'secureConnect');
  return tls;
}

async function transfer(way: Way): Promise<{ cpuSeconds: number; seconds: number }> {
  const socket = await open(way);
  const payload = Buffer.alloc(CHUNK, 0x61);
  let got = 0;
  const done = new Promise<void>((resolve) => {
    const take = (n: number): void => {
      got += n;
      if (got >= bytes) {
        received.delete(take);
        resolve();
      }
    };
    received.add(take);
  });
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let sent = 0; sent < bytes; sent += CHUNK) {
    if (!socket.write(payload)) await once(socket, 'drain');
  }
  await done;
  const used = process.cpuUsage(cpu);
  const seconds = (performance.now() - started) / 1000;
  socket.destroy();
  return { cpuSeconds: (used.user + used.system) / 1e6, seconds };
}

const results: Record<string, Array<{ cpuSeconds: number; seconds: number }>> = { direct: [], upgraded: [], cleartext: [] };
const callgrindDump = (): void => {
  if (process.env.CALLGRIND === '1') execFileSync('callgrind_control', ['-d', String(process.pid)], { stdio: 'ignore' });
};
for (let round = 0; round < rounds; round++) {
  if (round === rounds - 1) callgrindDump();
  for (const way of ways) results[way]!.push(await transfer(way));
}
callgrindDump();
const gb = bytes / 2 ** 30;
const summary = (runs: Array<{ cpuSeconds: number; seconds: number }>) =>
  runs.length === 0
    ? undefined
    : { cpuSecondsPerGB: median(runs.map((r) => r.cpuSeconds / gb)), mbPerSecond: median(runs.map((r) => bytes / 2 ** 20 / r.seconds)) };
const report = {
  bytes,
  rounds,
  direct: summary(results.direct!),
  upgraded: summary(results.upgraded!),
  cleartext: summary(results.cleartext!),
};
process.stdout.write(`${JSON.stringify(report)}\n`);
upgrade.close();
process.exit(0);
