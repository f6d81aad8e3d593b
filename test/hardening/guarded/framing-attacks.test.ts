// The tunnel framing's attacks of issue 37 against a real `gate-mux proxy` process, with real agent
// certificates and the project's own codec as the hostile agent (test/helpers/hostile-agent.ts),
// each under the ping guard (test/helpers/ping-guard.ts): a PING flood that never reads, before
// admission and after it, and one-byte DATA frames to clients that stopped reading. During each,
// every ping answers within 250 ms; meanwhile a real agent's tunnel and a client through it stay
// up and carry bytes after; the proxy's memory stays bounded and comes back near its baseline.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { joinProxy } from '../../../lib/tunnel/join-client.js';
import { controlFrame, encodeAnswer, frameHeader, FrameType } from '../../../lib/tunnel-framing/frames.js';
import { spawnAgentProcess } from '../../helpers/agent-process.js';
import { type HostileAgent, hostileAgent } from '../../helpers/hostile-agent.js';
import { closeServer, readUntil, startTaggedTcpServer, tlsClient, until } from '../../helpers/net.js';
import { REFUSAL_BOUND_MS, startGuardedProxy, underPingGuard } from '../../helpers/ping-guard.js';
import { GATE_MUX } from '../../helpers/proxy-command.js';
import { tempDir } from '../../helpers/temp-dir.js';

/** The proxy's resident memory, in MiB (Linux: /proc). */
function rssMiB(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb ?? 0) / 1024;
}

/** PINGs in one buffer, as many as fit 64 KiB. */
const PINGS = Buffer.concat(Array.from({ length: 3800 }, (_, i) => controlFrame(FrameType.PING, 0, 0, Buffer.alloc(8, i & 0xff))));

/**
 * Writes PINGs on `socket` (which never reads) until the proxy closes it or `giveUpMs` passes;
 * resolves with how many were written and whether the proxy closed it.
 */
function pingFlood(socket: TLSSocket, giveUpMs: number): Promise<{ pings: number; closedByProxy: boolean; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    let pings = 0;
    let finished = false;
    const done = (closedByProxy: boolean): void => {
      if (finished) return;
      finished = true;
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ pings, closedByProxy, ms: performance.now() - started });
    };
    const giveUp = setTimeout(() => done(false), giveUpMs);
    socket.once('close', () => done(true));
    const write = (): void => {
      while (!finished && !socket.destroyed) {
        pings += 3800;
        if (!socket.write(PINGS)) {
          socket.once('drain', write);
          return;
        }
      }
    };
    write();
  });
}

const MiB = 1024 * 1024;
const FRAMES_PER_WRITE = 10_000;

/** `count` DATA frames of `size` bytes each on stream `id`. */
function dataFrames(id: number, size: number, count: number): Buffer {
  const frame = Buffer.concat([frameHeader(FrameType.DATA, 0, id, size), Buffer.alloc(size, 'x')]);
  const all = Buffer.allocUnsafe(frame.length * count);
  for (let i = 0; i < count; i++) frame.copy(all, i * frame.length);
  return all;
}

/**
 * Sends up to `total` bytes on stream `id` in DATA frames of `size` bytes, within the proxy's
 * credit, waiting for more as it comes back; stops once none came for a second (the client behind
 * the stream has stopped reading and its connection's buffers are full). Returns the bytes sent.
 */
async function pour(agent: HostileAgent, id: number, size: number, total: number): Promise<number> {
  const batch = dataFrames(id, size, size === 1 ? FRAMES_PER_WRITE : 16);
  const perBatch = batch.length / (size + 9);
  let sent = 0;
  let idleSince = performance.now();
  while (sent < total && !agent.socket.destroyed) {
    const frames = Math.min(perBatch, Math.floor(Math.min(agent.credit(id), total - sent) / size));
    if (frames === 0) {
      if (performance.now() - idleSince > 1000) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
      continue;
    }
    idleSince = performance.now();
    agent.spend(id, frames * size);
    sent += frames * size;
    if (!agent.send(frames === perBatch ? batch : batch.subarray(0, frames * (size + 9))))
      await Promise.race([new Promise((resolve) => agent.socket.once('drain', resolve)), agent.closed]);
  }
  return sent;
}

t.test('the framing attacks of issue 37, each under the ping guard, beside a real agent', async (t) => {
  const tagged = await startTaggedTcpServer('behind-the-agent');
  t.teardown(() => closeServer(tagged.server));
  const proxy = await startGuardedProxy(t, {
    proxy: ['upstreams:', `  redis: tunnel:survivor/127.0.0.1:${tagged.port}`, '  mongodb: tunnel:evil/127.0.0.1:9'],
  });
  // Agent certificates, as any holder of the development token gets them (made before any guard).
  const endpoint = { proxy: `127.0.0.1:${proxy.port}`, serverName: 'localhost', dialProxy: null };
  const evil = await joinProxy(endpoint, { token: proxy.devToken, name: 'evil', caPin: proxy.caPin });
  const flooder = await joinProxy(endpoint, { token: proxy.devToken, name: 'flooder', caPin: proxy.caPin });

  // A real agent, and a client through its tunnel held open across every attack.
  const stateDir = await tempDir(t, 'framing-attacks-agent');
  const agent = spawnAgentProcess(
    t,
    GATE_MUX,
    [
      'agent',
      ...['--proxy', `127.0.0.1:${proxy.port}`, '--server-name', 'localhost', '--name', 'survivor'],
      ...['--state-dir', join(stateDir, 'state'), '--token', proxy.devToken, '--ca-pin', proxy.caPin],
      ...['--allow', `127.0.0.1:${tagged.port}`],
    ],
    { PATH: process.env.PATH },
  );
  await until(() => agent.output().includes('tunnel up') || agent.child.exitCode !== null, 'the agent tunnel', 20_000).catch((err: Error) =>
    t.fail(`${err.message}: ${agent.output()}`),
  );
  const held = await tlsClient(proxy.port, { servername: 'localhost', ca: proxy.ca, ALPNProtocols: ['gate-redis'] });
  t.teardown(() => held.destroy());
  t.equal((await readUntil(held, (s) => s.includes('\n'))).trim(), 'behind-the-agent', 'a client through the real agent');
  const stillCarries = async (label: string): Promise<void> => {
    const echoed = readUntil(held, (s) => s.includes(`${label}\n`));
    held.write(`${label}\n`);
    t.match(await echoed, label, `the client through the real agent still carries bytes: ${label}`);
  };
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const baseline = rssMiB(proxy.pid);
  t.comment(`proxy RSS at the start: ${baseline.toFixed(0)} MiB`);
  let peak = baseline;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMiB(proxy.pid));
  }, 100);
  t.teardown(() => clearInterval(sampler));
  /** `attack`, and the proxy's worst RSS during it over what it was just before, in MiB. */
  const growth = async <T>(attack: () => Promise<T>): Promise<{ result: T; grewMiB: number }> => {
    const start = rssMiB(proxy.pid);
    peak = start;
    const result = await attack();
    return { result, grewMiB: peak - start };
  };

  // 1. PINGs before admission, never reading: eight sessions of one certificate that never answer
  // the describe request. The issue measured 3.6 s pings and +220 MiB for one session of 10 s.
  const first = await growth(() =>
    underPingGuard(t, proxy, '8 sessions flooding PINGs before admission, never reading', async () => {
      const sockets = await Promise.all(
        Array.from({ length: 8 }, () => hostileAgent({ port: proxy.port, ca: evil.ca, cert: evil.cert, key: evil.key, read: false })),
      );
      return Promise.all(sockets.map((a) => pingFlood(a.socket, 5000)));
    }),
  );
  t.ok(
    first.result.every((r) => r.closedByProxy && r.ms < REFUSAL_BOUND_MS),
    `every session cut by the proxy within ${REFUSAL_BOUND_MS} ms: ${first.result.map((r) => `${r.pings} PINGs written, ${r.ms.toFixed(0)} ms`).join('; ')}`,
  );
  t.ok(first.grewMiB < 64, `the proxy's memory grew ${first.grewMiB.toFixed(0)} MiB at the worst (the issue: +220 MiB for one session)`);
  await stillCarries('after the flood before admission');

  // 2. The same once admitted: the agent answers the describe request, then floods and never reads.
  const second = await growth(() =>
    underPingGuard(t, proxy, 'an admitted agent flooding PINGs, never reading', async () => {
      const a = await hostileAgent({ port: proxy.port, ca: flooder.ca, cert: flooder.cert, key: flooder.key, admit: true });
      await a.admitted;
      a.socket.removeAllListeners('data');
      a.socket.pause();
      return pingFlood(a.socket, 15_000);
    }),
  );
  // Reading stops once its answers go unread; 5 s later (STALLED_ANSWERS_MS) it is cut.
  t.ok(second.result.closedByProxy, `cut by the proxy after ${second.result.pings} PINGs written, in ${second.result.ms.toFixed(0)} ms`);
  t.ok(second.result.pings < 3_000_000, 'it could write what the kernel buffers hold, not what it can send');
  t.ok(second.grewMiB < 64, `the proxy's memory grew ${second.grewMiB.toFixed(0)} MiB at the worst`);
  await stillCarries('after the flood once admitted');

  // 3. One-byte DATA frames to clients that stopped reading: bulk first, until the client's TCP
  // buffers are nearly full (about 3.8 MiB on loopback), then one-byte frames for as long as the
  // proxy gives credit: what it holds then (a stream's window, the Duplex's read-ahead) came a
  // byte a frame. The issue measured about 140 bytes of heap a byte (2.3 GB for one agent).
  const CLIENTS = 4;
  let dribbler: Awaited<ReturnType<typeof hostileAgent>> | undefined;
  const streams: number[] = [];
  let opened = (): void => {};
  const allOpened = new Promise<void>((resolve) => (opened = resolve));
  dribbler = await hostileAgent({
    port: proxy.port,
    ca: evil.ca,
    cert: evil.cert,
    key: evil.key,
    admit: true,
    onConnect: (id) => {
      dribbler!.send(controlFrame(FrameType.ANSWER, 0, id, encodeAnswer({ status: 200, code: '', reason: '' })));
      streams.push(id);
      if (streams.length === CLIENTS) opened();
    },
  });
  t.teardown(() => dribbler?.socket.destroy());
  await dribbler.admitted;
  const clients: TLSSocket[] = [];
  const third = await growth(() =>
    underPingGuard(t, proxy, `one-byte DATA frames, ${CLIENTS} MiB of credit, to ${CLIENTS} clients not reading`, async () => {
      for (let i = 0; i < CLIENTS; i++) {
        const client = await tlsClient(proxy.port, { servername: 'localhost', ca: proxy.ca, ALPNProtocols: ['gate-mongodb'] });
        client.pause(); // never reads
        client.on('error', () => {});
        clients.push(client);
      }
      await allOpened;
      let frames = 0;
      for (const id of streams) await pour(dribbler!, id, 16 * 1024, 3 * MiB);
      for (const id of streams) frames += await pour(dribbler!, id, 1, 4 * MiB);
      return frames;
    }),
  );
  t.ok(third.result >= CLIENTS * MiB, `${third.result} one-byte frames written, within the credit`);
  t.notOk(dribbler.socket.destroyed, 'within its credit the dribbling agent is not cut: what it costs is bounded instead');
  // A million one-byte frames held a Buffer and a buffered chunk each: about 140 MiB per MiB.
  t.ok(
    third.grewMiB < 200,
    `the proxy's memory grew ${third.grewMiB.toFixed(0)} MiB at the worst for ${CLIENTS} MiB held (about 560 before)`,
  );
  for (const client of clients) client.destroy();
  dribbler.socket.destroy();
  await stillCarries('after the dribble');

  // Afterwards: the real agent's tunnel never dropped, and the memory comes back.
  t.notMatch(agent.output(), /tunnel down|reconnect/i, 'the real agent never lost its tunnel');
  const settled = Date.now() + 10_000;
  let now = rssMiB(proxy.pid);
  while (Date.now() < settled && now - baseline > 64) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    now = rssMiB(proxy.pid);
  }
  t.ok(now - baseline <= 64, `the proxy's memory back near its baseline: ${now.toFixed(0)} MiB (started at ${baseline.toFixed(0)})`);
  t.notMatch(proxy.output(), /"level":(50|60)/, 'nothing logged at error level');
});
