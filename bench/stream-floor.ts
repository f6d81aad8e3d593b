// `npm run bench:stream-floor -- [--streams 5000] [--warmup 1000] [--concurrency 64] [--turns 3]`:
// what one tunnel stream costs in Node's own HTTP/2, with none of gate-mux's code: a CONNECT
// stream opened on a TLS session over loopback, answered 200, then `turns` times a ClientHello's
// worth of bytes one way and a 1 KiB answer back (a passed-through TLS handshake and its request
// take about 3), both sides ended: one connection on one hop of a tunnel. The opener (the
// proxy's side) and the answerer (the agent's, a child process) are counted together: the figure
// is one hop's two ends. Beside it, the same exchange on a TCP connection (net.connect, accept,
// the same bytes, both FINs): what a forwarded connection's two sockets cost through net.Socket.
// And the same stream on the tunnel framing of our own over a second TLS connection (lib/tunnel-framing):
// what a hop would cost if the tunnel did not speak HTTP/2.
//
// Why: the rate workload compares a tunnelled connection's CPU with the forward route's (aims
// ≤ 2× and ≤ 3×, BENCHMARKS.md). This is what Node's HTTP/2 takes on every hop through its public
// API (request(), respond(), the stream's Duplex), whatever gate-mux's own code costs on top.
import { connect as h2Connect, createServer as h2Server, type ClientHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { connect as netConnect, createServer as netServer } from 'node:net';
import { createServer as tlsServer, connect as tlsConnect } from 'node:tls';
import { parseArgs } from 'node:util';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { devCertificates } from '../lib/pki/dev-certificates.js';
import { answerCpuAsks, answererTurns, childCpu, cpuOf, fromChild, measure, medianRun, openerTurns, type Cpu } from './floor-exchange.js';
import { FramedSession } from '../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../lib/tunnel-framing/framed-stream.js';
import { StreamKind } from '../lib/tunnel-framing/frames.js';
import { listening } from '../test/helpers/net.js';

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
function http2Exchange(session: ClientHttp2Session): Promise<void> {
  return openerTurns(session.request({ ':method': 'CONNECT', ':authority': 'resource.internal:5432' }), TURNS);
}

function answerStream(stream: ServerHttp2Stream): void {
  stream.respond({ ':status': 200 });
  answererTurns(stream);
}

function framedExchange(session: FramedSession): Promise<void> {
  const stream = session.open({ kind: StreamKind.CONNECT, target: 'resource.internal:5432', client: '' });
  const turns = openerTurns(stream, TURNS);
  stream.resume();
  return turns;
}

function answerFramed(stream: FramedStream): void {
  stream.respond({ status: 200, code: '', reason: '' });
  answererTurns(stream);
  stream.resume();
}

function tcpExchange(port: number): Promise<void> {
  return openerTurns(netConnect({ port, host: '127.0.0.1', allowHalfOpen: true }), TURNS);
}

/**
 * The answerer, in a process of its own as the agent is: dials the opener's TLS listener and serves
 * HTTP/2 on it (the agent's side of a tunnel), answers TCP connections, and tells its CPU on asking.
 */
async function answerer(): Promise<void> {
  const tcp = netServer({ allowHalfOpen: true }, answererTurns);
  const tcpPort = await listening(tcp);
  const h2 = h2Server();
  h2.on('stream', answerStream);
  answerCpuAsks();
  process.on('message', (message: { tunnelPort?: number; framedPort?: number; ca?: string; stop?: true }) => {
    if (message.tunnelPort !== undefined) {
      const { tunnelPort: port, ca } = message;
      const socket = tlsConnect({ port, host: '127.0.0.1', ca, servername: 'localhost', ALPNProtocols: ['h2'] });
      socket.once('secureConnect', () => h2.emit('connection', socket));
    }
    if (message.framedPort !== undefined) {
      const { framedPort: port, ca } = message;
      const socket = tlsConnect({ port, host: '127.0.0.1', ca, servername: 'localhost' });
      new FramedSession(socket, { side: 'dialer', onOpen: answerFramed });
    }
    if (message.stop) process.exit(0);
  });
  process.send!({ tcpPort });
}

async function main(): Promise<void> {
  const { ca, server } = devCertificates();
  const child = fork(fileURLToPath(import.meta.url), ['--answerer'], { execArgv: process.execArgv });
  const tcpPort = await fromChild<number>(child, 'tcpPort');
  // This process is the opener, the child the answerer.
  const cpu: Cpu = async () => {
    const answerer = childCpu(child);
    return [cpuOf(process.cpuUsage()), await answerer];
  };
  // The tunnel's shape: the agent dials TLS and serves HTTP/2 on it; the proxy opens the streams.
  const listener = tlsServer({ cert: server.cert, key: server.key, ALPNProtocols: ['h2'] });
  const proxySide = new Promise<ClientHttp2Session>((resolve) => {
    listener.once('secureConnection', (socket) => resolve(h2Connect('http://agent.tunnel', { createConnection: () => socket })));
  });
  child.send({ tunnelPort: await listening(listener), ca: ca.cert });
  const session = await proxySide;
  const framedListener = tlsServer({ cert: server.cert, key: server.key });
  const framedSide = new Promise<FramedSession>((resolve) =>
    framedListener.once('secureConnection', (socket) => resolve(new FramedSession(socket, { side: 'listener' }))),
  );
  child.send({ framedPort: await listening(framedListener), ca: ca.cert });
  const framed = await framedSide;

  const exchanges = [() => http2Exchange(session), () => framedExchange(framed), () => tcpExchange(tcpPort)];
  for (const exchange of exchanges) await measure(WARMUP, CONCURRENCY, cpu, exchange);
  // Alternated, so that a change of the machine's load falls on all three.
  const runs: number[][][] = exchanges.map(() => []);
  for (let round = 0; round < 3; round++) {
    for (const [i, exchange] of exchanges.entries()) runs[i]!.push(await measure(STREAMS, CONCURRENCY, cpu, exchange));
  }
  const [h2, framedFigures, tcp] = runs.map(medianRun) as [number[], number[], number[]];
  const rows: [string, number[]][] = [
    ['a CONNECT stream on one TLS HTTP/2 session', h2],
    ['a stream of the tunnel framing on one TLS connection (lib/tunnel-framing)', framedFigures],
    ['a TCP connection on loopback', tcp],
  ];
  process.stdout.write(
    `Node ${process.version}, ${STREAMS} exchanges of ${TURNS} turns × 3 rounds, ${CONCURRENCY} at a time; CPU µs per exchange of the opener (the proxy's side) and the answerer (the agent's), the round with the median total:\n\n`,
  );
  process.stdout.write('| exchange | CPU µs | opener | answerer | × TCP |\n| --- | ---: | ---: | ---: | ---: |\n');
  for (const [name, [opener, answerer]] of rows) {
    const total = opener! + answerer!;
    const ratio = total / (tcp[0]! + tcp[1]!);
    process.stdout.write(`| ${name} | ${total.toFixed(1)} | ${opener!.toFixed(1)} | ${answerer!.toFixed(1)} | ${ratio.toFixed(2)}× |\n`);
  }
  session.close();
  listener.close();
  framedListener.close();
  child.send({ stop: true });
}

if (process.argv.includes('--answerer')) await answerer();
else await main();
