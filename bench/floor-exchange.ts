// The exchange `bench:stream-floor` and `bench:tunnel-floor` carry: `turns` times a ClientHello's
// worth of bytes one way and a 1 KiB answer back (a passed-through TLS handshake and its request
// take about 3), then both FINs. And how they count CPU: per exchange, per process.
import type { EventEmitter } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import { clientHelloHandshake, records } from './hellos.js';

/**
 * A ClientHello of 517 bytes (the size a TLS 1.3 client sends) for SNI bench.local and ALPN
 * gate-bench: a gate-mux bench router sends it to upstream A, so the same exchange can run through
 * gate-mux too. Later turns repeat it as opaque bytes.
 */
export const REQUEST = records(clientHelloHandshake({ sni: 'bench.local', alpn: ['gate-bench'], pqKeyShareBytes: 0, padTo: 512 }));
export const ANSWER = Buffer.alloc(1024, 0x17);

/** One side of an exchange: an HTTP/2 stream, a socket or a framed stream (lib/tunnel-framing). */
export type Side = EventEmitter & { write(chunk: Buffer): unknown; end(): unknown };

/**
 * The opener's side: `turns` times a request and its whole answer, then its FIN; resolves at the
 * close once the answerer's FIN came, rejects if any byte is missing.
 */
export function openerTurns(side: Side, turns: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let turn = 0;
    let got = 0;
    side.on('data', (chunk: Buffer) => {
      got += chunk.length;
      if (got < ANSWER.length * (turn + 1)) return;
      turn++;
      if (turn < turns) side.write(REQUEST);
      else side.end();
    });
    side.once('error', reject);
    side.once('close', () => (got === ANSWER.length * turns ? resolve() : reject(new Error(`closed after ${got} bytes`))));
    side.write(REQUEST);
  });
}

/** The answerer's side: a 1 KiB answer to each whole request, its FIN after the opener's. */
export function answererTurns(side: Side): void {
  let got = 0;
  side.on('data', (chunk: Buffer) => {
    got += chunk.length;
    while (got >= REQUEST.length) {
      got -= REQUEST.length;
      side.write(ANSWER);
    }
  });
  side.once('end', () => side.end());
  side.on('error', () => {});
}

/** CPU µs (user + system) of each process counted, read at once, in a fixed order. */
export type Cpu = () => Promise<number[]>;

/**
 * Runs `count` exchanges, `concurrency` at a time; resolves with each counted process's CPU µs
 * per exchange.
 */
export async function measure(count: number, concurrency: number, cpu: Cpu, exchange: () => Promise<void>): Promise<number[]> {
  const before = await cpu();
  let started = 0;
  const worker = async (): Promise<void> => {
    while (started < count) {
      started++;
      await exchange();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const after = await cpu();
  return after.map((us, i) => (us - before[i]!) / count);
}

export function cpuOf(usage: NodeJS.CpuUsage): number {
  return usage.user + usage.system;
}

/**
 * In a child: answers the parent's `{ cpu: true }` with this process's CPU µs (childCpu's other
 * end), and exits when the parent is gone (finished or failed: nothing is left to answer).
 */
export function answerCpuAsks(): void {
  process.on('message', (message: { cpu?: true }) => {
    if (message.cpu) process.send!({ cpu: cpuOf(process.cpuUsage()) });
  });
  process.once('disconnect', () => process.exit(0));
}

/** The first message of `child` that carries `key`: its value. */
export function fromChild<T>(child: ChildProcess, key: string): Promise<T> {
  return new Promise((resolve) => {
    const listener = (message: Record<string, T>): void => {
      if (!(key in message)) return;
      child.off('message', listener);
      resolve(message[key]!);
    };
    child.on('message', listener);
  });
}

/** The CPU µs a child has used so far (it answers `{ cpu: true }` with `{ cpu }`). */
export function childCpu(child: ChildProcess): Promise<number> {
  const answer = fromChild<number>(child, 'cpu');
  child.send({ cpu: true });
  return answer;
}

/** The round whose total is the median, with its split. */
export function medianRun(runs: number[][]): number[] {
  const total = (run: number[]): number => run.reduce((a, b) => a + b, 0);
  return [...runs].sort((a, b) => total(a) - total(b))[Math.floor(runs.length / 2)]!;
}
