// `npm run bench:stream-floor -- [--streams 5000] [--warmup 1000] [--concurrency 64] [--turns 3]`:
// what one tunnel stream costs in Node's own HTTP/2, with none of gate-mux's code: a CONNECT
// stream opened on a TLS session over loopback, answered 200, then `turns` times a ClientHello's
// worth of bytes one way and a 1 KiB answer back (a passed-through TLS handshake and its request
// take about 3), both sides ended: one connection on one hop of a tunnel. The opener (the
// proxy's side) and the answerer (the agent's, a child process) are counted together: the figure
// is one hop's two ends. Beside it, the same exchange on a TCP connection (net.connect, accept,
// the same bytes, both FINs): what a forwarded connection's two sockets cost through net.Socket.
//
// Why: the rate workload compares a tunnelled connection's CPU with the forward route's (aims
// ≤ 2× and ≤ 3×, BENCHMARKS.md). This is what Node's HTTP/2 takes on every hop through its public
// API (request(), respond(), the stream's Duplex), whatever gate-mux's own code costs on top.
import { connect as h2Connect, createServer as h2Server, type ClientHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { connect as netConnect, createServer as netServer, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { createServer as tlsServer, connect as tlsConnect } from 'node:tls';
import { parseArgs } from 'node:util';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { devCertificates } from '../lib/pki/dev-certificates.js';

const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '5000' },
    warmup: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '64' },
    turns: { type: 'string', default: '3' },
    answerer: { type: 'boolean', default: false },
  },
});
const STREAMS = Number(values.streams);
const WARMUP = Number(values.warmup);
const CONCURRENCY = Number(values.concurrency);
const TURNS = Number(values.turns);
const REQUEST = Buffer.alloc(517, 0x16); // a ClientHello's size
const ANSWER = Buffer.alloc(1024, 0x17);

/** CPU µs (user + system) of this process (the opener) and of the answerer's, read at once. */
type Cpu = () => Promise<{ opener: number; answerer: number }>;

/** Runs `count` exchanges, `CONCURRENCY` at a time; resolves with each process's CPU µs per exchange. */
async function measure(count: number, cpu: Cpu, exchange: () => Promise<void>): Promise<{ opener: number; answerer: number }> {
  const before = await cpu();
  let started = 0;
  const worker = async (): Promise<void> => {
    while (started < count) {
      started++;
      await exchange();
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const after = await cpu();
  return { opener: (after.opener - before.opener) / count, answerer: (after.answerer - before.answerer) / count };
}

function cpuOf(usage: NodeJS.CpuUsage): number {
  return usage.user + usage.system;
}

/**
 * The opener's side, on a Duplex (the stream or the socket): `TURNS` times a request and its whole
 * answer, then its FIN; resolves at the close once the answerer's FIN came.
 */
function openerTurns(side: Duplex): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let turn = 0;
    let got = 0;
    side.on('data', (chunk: Buffer) => {
      got += chunk.length;
      if (got < ANSWER.length * (turn + 1)) return;
      turn++;
      if (turn < TURNS) side.write(REQUEST);
      else side.end();
    });
    side.once('error', reject);
    side.once('close', () => (got === ANSWER.length * TURNS ? resolve() : reject(new Error(`closed after ${got} bytes`))));
    side.write(REQUEST);
  });
}

/** The answerer's side: a 1 KiB answer to each whole request, its FIN after the opener's. */
function answererTurns(side: Duplex): void {
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

function http2Exchange(session: ClientHttp2Session): Promise<void> {
  return openerTurns(session.request({ ':method': 'CONNECT', ':authority': 'resource.internal:5432' }));
}

function answerStream(stream: ServerHttp2Stream): void {
  stream.respond({ ':status': 200 });
  answererTurns(stream);
}

function tcpExchange(port: number): Promise<void> {
  return openerTurns(netConnect({ port, host: '127.0.0.1', allowHalfOpen: true }));
}

/**
 * The answerer, in a process of its own as the agent is: dials the opener's TLS listener and serves
 * HTTP/2 on it (the agent's side of a tunnel), answers TCP connections, and tells its CPU on asking.
 */
async function answerer(): Promise<void> {
  const tcp = netServer({ allowHalfOpen: true }, answererTurns);
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const h2 = h2Server();
  h2.on('stream', answerStream);
  process.on('message', (message: { tunnelPort?: number; ca?: string; cpu?: true; stop?: true }) => {
    if (message.tunnelPort !== undefined) {
      const { tunnelPort: port, ca } = message;
      const socket = tlsConnect({ port, host: '127.0.0.1', ca, servername: 'localhost', ALPNProtocols: ['h2'] });
      socket.once('secureConnect', () => h2.emit('connection', socket));
    }
    if (message.cpu) process.send!({ cpu: cpuOf(process.cpuUsage()) });
    if (message.stop) process.exit(0);
  });
  // The opener gone (finished or failed), nothing is left to answer.
  process.once('disconnect', () => process.exit(0));
  process.send!({ tcpPort: (tcp.address() as AddressInfo).port });
}

async function main(): Promise<void> {
  const { ca, server } = devCertificates();
  const child = fork(fileURLToPath(import.meta.url), ['--answerer'], { execArgv: process.execArgv });
  const fromChild = <T>(key: string): Promise<T> =>
    new Promise((resolve) => {
      const listener = (message: Record<string, T>): void => {
        if (!(key in message)) return;
        child.off('message', listener);
        resolve(message[key]!);
      };
      child.on('message', listener);
    });
  const tcpPort = await fromChild<number>('tcpPort');
  const cpu: Cpu = async () => {
    const answer = fromChild<number>('cpu');
    child.send({ cpu: true });
    return { opener: cpuOf(process.cpuUsage()), answerer: await answer };
  };
  // The tunnel's shape: the agent dials TLS and serves HTTP/2 on it; the proxy opens the streams.
  const listener = tlsServer({ cert: server.cert, key: server.key, ALPNProtocols: ['h2'] });
  const proxySide = new Promise<ClientHttp2Session>((resolve) => {
    listener.once('secureConnection', (socket) => resolve(h2Connect('http://agent.tunnel', { createConnection: () => socket })));
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  child.send({ tunnelPort: (listener.address() as AddressInfo).port, ca: ca.cert });
  const session = await proxySide;

  await measure(WARMUP, cpu, () => http2Exchange(session));
  await measure(WARMUP, cpu, () => tcpExchange(tcpPort));
  // Alternated, so that a change of the machine's load falls on both.
  type Run = { opener: number; answerer: number };
  const h2Runs: Run[] = [];
  const tcpRuns: Run[] = [];
  for (let round = 0; round < 3; round++) {
    h2Runs.push(await measure(STREAMS, cpu, () => http2Exchange(session)));
    tcpRuns.push(await measure(STREAMS, cpu, () => tcpExchange(tcpPort)));
  }
  // The round whose total is the median, with its split.
  const median = (runs: Run[]): Run => [...runs].sort((a, b) => a.opener + a.answerer - (b.opener + b.answerer))[1]!;
  const tcp = median(tcpRuns);
  const rows: [string, Run][] = [
    ['a CONNECT stream on one TLS HTTP/2 session', median(h2Runs)],
    ['a TCP connection on loopback', tcp],
  ];
  process.stdout.write(
    `Node ${process.version}, ${STREAMS} exchanges of ${TURNS} turns × 3 rounds, ${CONCURRENCY} at a time; CPU µs per exchange of the opener (the proxy's side) and the answerer (the agent's), the round with the median total:\n\n`,
  );
  process.stdout.write('| exchange | CPU µs | opener | answerer | × TCP |\n| --- | ---: | ---: | ---: | ---: |\n');
  for (const [name, run] of rows) {
    const total = run.opener + run.answerer;
    const ratio = total / (tcp.opener + tcp.answerer);
    process.stdout.write(
      `| ${name} | ${total.toFixed(1)} | ${run.opener.toFixed(1)} | ${run.answerer.toFixed(1)} | ${ratio.toFixed(2)}× |\n`,
    );
  }
  session.close();
  listener.close();
  child.send({ stop: true });
}

if (process.argv.includes('--answerer')) await answerer();
else await main();
