// Passthrough on bare libuv handles (lib/transport/uv.ts): what only this path does by itself, compared
// with the net.Socket path where both can do it: dial errors and resets named by side, hostname
// upstreams (its own DNS lookup), PROXY header out, byte counters, idle sweeps, handing a handle
// to a stream handler with the peeked bytes intact. The relay and lifecycle tests run on both.
import t from 'tap';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, forward } from '../../lib/handlers/builders.js';
import { handlesAvailable } from '../../lib/transport/uv.js';
import { checkHandles, FAST_PATH_ENV } from '../../lib/transport/self-test.js';
import { IdleSweep } from '../../lib/transport/idle-sweep.js';
import { closeServer, listening, liveHandles, readUntil, refusedPort, tcpClient, until } from '../helpers/net.js';
import { captureLogs } from '../hardening/log-capture.js';
import type { Route } from '../../lib/mux/types.js';

t.ok(handlesAvailable, 'this Node offers the bare handles (Node 20 and later keep tcp_wrap/stream_wrap)');

t.test('the handles pass their behaviour self-test on this Node; the environment switch turns them off', async (t) => {
  t.same(await checkHandles({}), { ok: true }, `a loopback round trip through every binding works on ${process.version}`);
  for (const value of ['0', 'off', 'FALSE']) {
    const off = await checkHandles({ [FAST_PATH_ENV]: value });
    t.equal(off.ok, false, `${FAST_PATH_ENV}=${value} turns the fast path off`);
    t.match(off.ok ? '' : off.reason, FAST_PATH_ENV, 'and says so');
  }
  t.same(await checkHandles({ [FAST_PATH_ENV]: '1' }), { ok: true }, 'any other value leaves it on');
});

t.test('a multiplexer told by the environment to stay off the handles runs on net.Socket and logs why once', async (t) => {
  const port = await upstreamServer(t, (s) => s.pipe(s));
  // A child process: the self-test's answer is per process, and this one's is already 'on'.
  const script = `
    import { Multiplexer } from ${JSON.stringify(new URL('../../lib/mux/multiplexer.js', import.meta.url).href)};
    import { forward } from ${JSON.stringify(new URL('../../lib/handlers/builders.js', import.meta.url).href)};
    import { connect } from 'node:net';
    const lines = [];
    const logger = { child: () => logger, warn: (o, m) => lines.push(m + ' ' + o.reason), info() {}, debug() {}, error() {}, trace() {}, fatal() {}, level: 'info' };
    const routes = [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: ${port} }) }];
    const a = new Multiplexer({ routes, logger });
    const b = new Multiplexer({ routes, logger });
    const { port: p } = await a.listen({ port: 0 });
    await b.listen({ port: 0 });
    const echoed = await new Promise((resolve) => {
      const s = connect(p, '127.0.0.1', () => s.end('SSH-2.0-env\\r\\n'));
      let got = '';
      s.on('data', (d) => (got += d)).on('close', () => resolve(got));
    });
    console.log(JSON.stringify({ fastPath: [a.fastPath, b.fastPath], echoed, lines }));
    await a.close({ graceMs: 10 });
    await b.close({ graceMs: 10 });
  `;
  // Not spawnSync: the upstream lives in this process, whose event loop must keep running.
  const child = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, [FAST_PATH_ENV]: 'off' },
    encoding: 'utf8',
    timeout: 20_000,
  });
  const out = JSON.parse(child.stdout) as { fastPath: boolean[]; echoed: string; lines: string[] };
  t.same(out.fastPath, [false, false], 'both multiplexers on net.Socket');
  t.equal(out.echoed, 'SSH-2.0-env\r\n', 'and they route');
  t.equal(out.lines.length, 1, 'one log line for the process');
  t.match(out.lines[0], /net\.Socket.*GATE_MUX_FAST_PATH=off/);
});

async function withMux(
  t: Tap,
  routes: Route[],
  fastPath: boolean,
  options: Partial<ConstructorParameters<typeof Multiplexer>[0]> = {},
): Promise<{ port: number; mux: Multiplexer; logs: ReturnType<typeof captureLogs> }> {
  const logs = captureLogs();
  const mux = new Multiplexer({ routes, fastPath, logger: logs.logger, ...options });
  const { port } = await mux.listen({ port: 0 });
  t.teardown(() => mux.close({ graceMs: 50 }));
  return { port, mux, logs };
}
type Tap = { teardown(fn: () => unknown): void };

async function upstreamServer(t: Tap, onSocket: (s: Socket) => void): Promise<number> {
  const server = createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => {});
    // Half-open so the tests see each FIN; answering the router's FIN lets the server close.
    s.on('end', () => s.end());
    onSocket(s);
  });
  const port = await listening(server);
  t.teardown(() => closeServer(server));
  return port;
}

t.test('the option chooses the path; both carry the same bytes and count them alike', async (t) => {
  const port = await upstreamServer(t, (s) => s.pipe(s));
  const counted: Array<{ bytesIn: number; bytesOut: number }> = [];
  for (const fastPath of [true, false]) {
    const { port: muxPort, mux } = await withMux(
      t,
      [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port }) }],
      fastPath,
    );
    t.equal(mux.fastPath, fastPath);
    const client = await tcpClient(muxPort, { allowHalfOpen: true });
    client.write('SSH-2.0-count\r\n');
    await readUntil(client, (s) => s.includes('count'));
    client.end('more bytes');
    t.equal(await readUntil(client, () => false), 'more bytes', 'the rest arrived after the greeting, then the FIN');
    await until(() => mux.openConnections === 0, 'the connection to finish');
    const route = mux.stats().byRoute.ssh!;
    counted.push({ bytesIn: route.bytesIn, bytesOut: route.bytesOut });
  }
  t.same(counted[0], counted[1], 'the same byte counts on both paths');
  t.same(counted[0], { bytesIn: 25, bytesOut: 25 }, 'greeting and rest, in and out');
});

t.test('a hostname upstream is looked up, then dialed on a handle', async (t) => {
  const port = await upstreamServer(t, (s) => s.resume().end('from localhost\n'));
  const { port: muxPort } = await withMux(
    t,
    [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: 'localhost', port }) }],
    true,
  );
  const client = await tcpClient(muxPort);
  client.write('SSH-2.0-name\r\n');
  t.equal(await readUntil(client, () => false), 'from localhost\n');
});

t.test('a refused dial is GATE_ERR_DIAL_REFUSED, and nothing is left open', async (t) => {
  const deadPort = await refusedPort();
  const { port, mux, logs } = await withMux(
    t,
    [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: deadPort }) }],
    true,
  );
  const client = await tcpClient(port);
  let said = '';
  client.on('data', (d: Buffer) => (said += d.toString('latin1')));
  client.write('SSH-2.0-refused\r\n');
  await once(client, 'close');
  // Told why in its own protocol first (docs/protocols.md, "When a route fails").
  t.match(said, /^SSH-2\.0-gate-mux\r\n[\s\S]*gate: the upstream refused the connection \(GATE_ERR_DIAL_REFUSED\)/);
  await until(() => mux.openConnections === 0, 'the connection to finish');
  t.equal(mux.stats().failures.GATE_ERR_DIAL_REFUSED, 1);
  t.match(logs.text(), /refused the connection/);
});

t.test('resets are named by side: GATE_ERR_UPSTREAM_RESET and GATE_ERR_CLIENT_RESET', async (t) => {
  let held: Socket | undefined;
  const port = await upstreamServer(t, (s) => {
    held = s;
    s.resume().write('hello\n');
  });
  const {
    port: muxPort,
    mux,
    logs,
  } = await withMux(t, [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port }) }], true);

  const first = await tcpClient(muxPort);
  first.on('error', () => {});
  first.write('SSH-2.0-a\r\n');
  await readUntil(first, (s) => s.includes('hello'));
  held!.resetAndDestroy();
  await once(first, 'close');
  await until(() => mux.openConnections === 0, 'the first connection to finish');
  t.equal(mux.stats().failures.GATE_ERR_UPSTREAM_RESET, 1, 'upstream reset');

  const second = await tcpClient(muxPort);
  second.write('SSH-2.0-b\r\n');
  await readUntil(second, (s) => s.includes('hello'));
  const upstreamSide = held!;
  const upstreamClosed = once(upstreamSide, 'end');
  second.resetAndDestroy();
  await upstreamClosed; // the router closed its side of the upstream
  await until(() => mux.openConnections === 0, 'the second connection to finish');
  t.equal(mux.stats().failures.GATE_ERR_CLIENT_RESET, 1, 'client reset');
  t.match(logs.text(), /upstream 127\.0\.0\.1:\d+ connection failed: ECONNRESET/);
  t.match(logs.text(), /"remote":"127\.0\.0\.1"/, 'the failure names the client, read before the reset');
});

t.test('a PROXY v2 header goes out first, with the client address, then the peeked bytes', async (t) => {
  let first: Promise<Buffer> | undefined;
  const port = await upstreamServer(t, (s) => {
    first = new Promise((resolve) => {
      const chunks: Buffer[] = [];
      s.on('data', (d: Buffer) => {
        chunks.push(d);
        const all = Buffer.concat(chunks);
        if (all.includes('SSH-2.0-pp\r\n')) resolve(all);
      });
    });
  });
  const { port: muxPort } = await withMux(
    t,
    [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port }, { sendProxyHeader: 'v2' }) }],
    true,
  );
  const client = await tcpClient(muxPort);
  client.write('SSH-2.0-pp\r\n');
  await until(() => first !== undefined, 'the upstream connection');
  const bytes = await first!;
  t.same([...bytes.subarray(0, 12)], [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a], 'v2 signature');
  t.same([...bytes.subarray(16, 20)], [127, 0, 0, 1], 'source address is the client');
  t.equal(bytes.subarray(16 + 12).toString(), 'SSH-2.0-pp\r\n', 'then the client bytes');
  client.destroy();
});

t.test('a stream handler on a fast-path mux gets a net.Socket with the peeked bytes first', async (t) => {
  const route: Route = {
    name: 'ssh',
    match: { protocol: 'ssh' },
    handler: custom((socket) => {
      let text = '';
      socket.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes('tail')) socket.end(`custom got: ${text}`);
      });
    }),
  };
  const { port } = await withMux(t, [route], true);
  const client = await tcpClient(port);
  client.write('SSH-2.0-custom\r\n');
  client.write('tail');
  t.equal(await readUntil(client, () => false), 'custom got: SSH-2.0-custom\r\ntail');
});

t.test('idle timeout on the fast path closes a quiet relay, not a busy one', async (t) => {
  const port = await upstreamServer(t, (s) => s.pipe(s));
  const { port: muxPort, mux } = await withMux(
    t,
    [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port }) }],
    true,
    { idleTimeoutMs: 120 },
  );
  const quiet = await tcpClient(muxPort);
  quiet.resume().write('SSH-2.0-quiet\r\n');
  const busy = await tcpClient(muxPort);
  busy.write('SSH-2.0-busy\r\n');
  await readUntil(busy, (s) => s.includes('busy'));
  let busyClosed = false;
  busy.once('close', () => (busyClosed = true));
  // The busy client talks every 10 ms (bounded: at most 400 rounds) until the quiet one is closed.
  let quietClosed = false;
  quiet.once('close', () => (quietClosed = true));
  for (let i = 0; i < 400 && !quietClosed; i++) {
    busy.write('.');
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(quietClosed, 'the quiet relay was closed');
  t.notOk(busyClosed, 'the busy relay is still open');
  t.equal(mux.stats().failures.GATE_ERR_IDLE_TIMEOUT, 1);
  busy.destroy();
  await until(() => mux.openConnections === 0, 'connections to finish');
  await until(() => liveHandles().timers === 0, 'the sweep interval to stop');
  t.pass('the sweep stopped with nothing to watch');
});

t.test('IdleSweep reports only what did not read for a whole timeout, once', async (t) => {
  const sweep = new IdleSweep<{ reads: number }>(40);
  const busy = { reads: 0 };
  const quiet = { reads: 0 };
  const reported: string[] = [];
  sweep.add(busy, () => reported.push('busy'));
  sweep.add(quiet, () => reported.push('quiet'));
  for (let i = 0; i < 200 && !reported.includes('quiet'); i++) {
    busy.reads++;
    await new Promise((r) => setTimeout(r, 5));
  }
  t.same(reported, ['quiet']);
  sweep.delete(busy);
  t.equal(liveHandles().timers, 0, 'no interval once nothing is watched');
});

t.test('a client that reset before it was accepted counts as GATE_ERR_CLIENT_CLOSED on both paths', async (t) => {
  for (const fastPath of [true, false]) {
    const { port, mux } = await withMux(
      t,
      [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: 9 }) }],
      fastPath,
      {
        proxyProtocol: { mode: 'on', trusted: ['127.0.0.1/32'] },
      },
    );
    // spawnSync blocks this event loop: the child connects and resets before the multiplexer
    // can accept, so the accepted socket no longer has a peer address.
    const child = spawnSync(process.execPath, [
      '-e',
      `const s = require('net').connect(${port}, '127.0.0.1', () => { s.resetAndDestroy(); setTimeout(() => {}, 50); });`,
    ]);
    t.equal(child.status, 0);
    await until(() => mux.stats().rejected === 1, 'the rejection');
    t.same(mux.stats().failures, { GATE_ERR_CLIENT_CLOSED: 1 }, `fastPath ${fastPath}: not an untrusted source`);
  }
});
