// The bench clients, one process per measurement, pinned by the runner to the client core.
// LOAD_MODE selects the workload; the result is one JSON line on stdout (idle mode talks a small
// line protocol with the runner: it prints "ready", waits for "close" on stdin, prints "closed").
// Every loop is bounded in count and in time (HARD_TIMEOUT_MS).
import { connect, createSecureContext, type TLSSocket } from 'node:tls';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';

const env = process.env;
const port = Number(env.PORT);
const mode = env.LOAD_MODE ?? 'check';
const hardTimeoutMs = Number(env.HARD_TIMEOUT_MS ?? 120_000);
// One context for every connection: building a SecureContext per connect costs more than the
// handshake we want to measure. The upstream certificate is self-signed for the bench, so chain
// verification is off; the handshake signature is still checked by TLS itself.
const secureContext = createSecureContext({});
const TAG_A = 0x41;

export interface HelloChoice {
  sni: string;
  alpn: string[];
}
const MAIN: HelloChoice = { sni: 'bench.local', alpn: ['gate-bench'] };

function open(choice: HelloChoice = MAIN): TLSSocket {
  const socket = connect({
    host: '127.0.0.1',
    port,
    servername: choice.sni,
    ALPNProtocols: choice.alpn,
    secureContext,
    rejectUnauthorized: false,
  });
  socket.on('error', () => {});
  return socket;
}

function emit(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

const hardTimer = setTimeout(() => {
  emit({ error: `load ${mode} hit its ${hardTimeoutMs} ms hard timeout` });
  process.exit(2);
}, hardTimeoutMs);
hardTimer.unref();

/** First byte of the answer to one connection: 'A', 'B', or an error word. */
function firstByte(choice: HelloChoice): Promise<string> {
  return new Promise((resolve) => {
    const socket = open(choice);
    const timer = setTimeout(() => done('timeout'), 5000);
    function done(answer: string): void {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    }
    socket.once('data', (chunk: Buffer) => done(String.fromCharCode(chunk[0] ?? 0x3f)));
    socket.once('close', () => done('closed'));
  });
}

async function check(): Promise<void> {
  const cases: Array<HelloChoice & { expect: string }> = [
    { sni: 'bench.local', alpn: ['gate-bench'], expect: 'A' },
    { sni: 'bench.local', alpn: ['h2', 'gate-bench'], expect: 'A' }, // "in the client's list"
    { sni: 'BENCH.local', alpn: ['gate-bench'], expect: 'A' }, // SNI is case-insensitive
    { sni: 'bench.local', alpn: ['h2'], expect: 'B' },
    { sni: 'other.local', alpn: ['gate-bench'], expect: 'B' },
  ];
  const results = [];
  for (const c of cases) {
    const got = await firstByte(c);
    results.push({ sni: c.sni, alpn: c.alpn, expect: c.expect, got });
  }
  emit({ ok: results.every((r) => r.got === r.expect), results });
}

async function bulk(): Promise<void> {
  const conns = Number(env.CONNS ?? 1);
  const expected = Number(env.BULK_BYTES ?? 1 << 30);
  let started = 0;
  const runs = Array.from(
    { length: conns },
    () =>
      new Promise<{ bytes: number; tagOk: boolean; end: number }>((resolve) => {
        const socket = open();
        let bytes = -1; // the tag byte is not payload
        let tagOk = false;
        socket.once('data', (chunk: Buffer) => {
          tagOk = chunk[0] === TAG_A;
          if (started === 0) started = performance.now();
          socket.write('G');
        });
        socket.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
        });
        socket.once('close', () => resolve({ bytes, tagOk, end: performance.now() }));
      }),
  );
  const done = await Promise.all(runs);
  const bytes = done.reduce((s, r) => s + Math.max(0, r.bytes), 0);
  const seconds = (Math.max(...done.map((r) => r.end)) - started) / 1000;
  emit({
    bytes,
    seconds,
    mbPerSecond: bytes / 1e6 / seconds,
    complete: done.every((r) => r.bytes === expected),
    misrouted: done.filter((r) => !r.tagOk).length,
  });
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function rate(): Promise<void> {
  const concurrency = Number(env.CONCURRENCY ?? 64);
  const durationMs = Number(env.DURATION_MS ?? 4000);
  // COUNT: stop after that many connections (bench/instructions.ts), still bounded by the duration.
  const count = Number(env.COUNT ?? Infinity);
  let started = 0;
  const expectBytes = 1 + 1024;
  const ttfb: number[] = [];
  let ok = 0;
  let failed = 0;
  let misrouted = 0;
  const start = performance.now();
  const deadline = start + durationMs;
  const sockets = new Set<TLSSocket>();
  await new Promise<void>((resolve) => {
    let active = concurrency;
    const stopTimer = setTimeout(() => {
      for (const s of sockets) s.destroy(); // a stuck connection must not hold the run
    }, durationMs + 10_000);
    const one = (): void => {
      if (performance.now() >= deadline || started >= count) {
        if (--active === 0) {
          clearTimeout(stopTimer);
          resolve();
        }
        return;
      }
      started++;
      const t0 = performance.now();
      let first = -1;
      let got = 0;
      const socket = open();
      sockets.add(socket);
      socket.on('data', (chunk: Buffer) => {
        if (first < 0) {
          first = performance.now() - t0;
          if (chunk[0] !== TAG_A) misrouted++;
        }
        got += chunk.length;
      });
      socket.once('close', () => {
        sockets.delete(socket);
        if (got === expectBytes) {
          ok++;
          ttfb.push(first);
        } else failed++;
        one();
      });
    };
    for (let i = 0; i < concurrency; i++) one();
  });
  const seconds = (performance.now() - start) / 1000;
  ttfb.sort((a, b) => a - b);
  emit({
    connections: ok,
    failed,
    misrouted,
    seconds,
    perSecond: ok / seconds,
    ttfbP50Ms: percentile(ttfb, 50),
    ttfbP99Ms: percentile(ttfb, 99),
  });
}

async function idle(): Promise<void> {
  const count = Number(env.COUNT ?? 5000);
  const concurrency = Number(env.CONCURRENCY ?? 64);
  const sockets: TLSSocket[] = [];
  let established = 0;
  let failed = 0;
  await new Promise<void>((resolve) => {
    let next = 0;
    let pending = 0;
    const launch = (): void => {
      while (pending < concurrency && next < count) {
        next++;
        pending++;
        const socket = open();
        sockets.push(socket);
        let settled = false;
        const settle = (ok: boolean): void => {
          if (settled) return;
          settled = true;
          pending--;
          if (ok) established++;
          else failed++;
          if (next === count && pending === 0) resolve();
          else launch();
        };
        socket.once('data', (chunk: Buffer) => settle(chunk[0] === TAG_A));
        socket.once('close', () => settle(false));
      }
    };
    launch();
  });
  emit({ ready: true, established, failed });
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line.trim() !== 'close') continue;
    let open = 0;
    await new Promise<void>((resolve) => {
      for (const s of sockets) {
        if (s.destroyed) continue;
        open++;
        s.once('close', () => {
          if (--open === 0) resolve();
        });
        s.destroy();
      }
      if (open === 0) resolve();
    });
    emit({ closed: true });
    break;
  }
  lines.close();
}

switch (mode) {
  case 'check':
    await check();
    break;
  case 'bulk':
    await bulk();
    break;
  case 'rate':
    await rate();
    break;
  case 'idle':
    await idle();
    break;
  default:
    emit({ error: `unknown LOAD_MODE ${mode}` });
    process.exitCode = 2;
}
process.exit();
