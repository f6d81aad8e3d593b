// `npm run bench:tunnel-floor -- [--connections 4000] [--warmup 800] [--concurrency 64] [--turns 3]`:
// the central path's routes with none of gate-mux's code, to tell what a tunnel's framing costs
// a whole connection. A client connection carries the floor's exchange (bench/floor-exchange.ts)
// to an echo server, three ways:
//
// - forward: one process accepts it, dials the server and relays both ways (the forward route);
// - through a tunnel on HTTP/2: a proxy process accepts it and opens a CONNECT stream on the HTTP/2
//   session over the TLS connection an agent process dialled; the agent dials the server on the
//   stream and answers 200; each relays its two ends (the local-tunnel route);
// - the same through a tunnel on a lean framing of our own (bench/lean-mux.ts).
//
// Every relay is the same few lines on Node's sockets and streams, so the routes differ only in
// how the tunnel carries a connection. The CPU counted is the forwarding process's, or the proxy's
// and the agent's together; the clients and the echo server (this process) are not counted.
//
// Why: the aims for the tunnelled routes are ≤ 2× the forward route's CPU per connection
// (BENCHMARKS.md). This tells whether a route on HTTP/2 can meet that at all, and whether a
// framing of our own could.
import { fork, type ChildProcess } from 'node:child_process';
import { connect as h2Connect, createServer as h2Server, type ClientHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { connect as netConnect, createServer as netServer, type AddressInfo, type Socket } from 'node:net';
import { createServer as tlsServer, connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { devCertificates } from '../lib/pki/dev-certificates.js';
import { answererTurns, childCpu, cpuOf, fromChild, measure, medianRun, openerTurns, type Side } from './floor-exchange.js';
import { LeanMux, type LeanStream } from './lean-mux.js';

const { values } = parseArgs({
  options: {
    connections: { type: 'string', default: '4000' },
    warmup: { type: 'string', default: '800' },
    concurrency: { type: 'string', default: '64' },
    turns: { type: 'string', default: '3' },
    role: { type: 'string' },
  },
});
const CONNECTIONS = Number(values.connections);
const WARMUP = Number(values.warmup);
const CONCURRENCY = Number(values.concurrency);
const TURNS = Number(values.turns);

/** A side that can be paused while the other cannot take more (sockets and HTTP/2 streams). */
type Pausable = Side & { pause?(): unknown; resume?(): unknown };

/** `from`'s bytes to `to`, pausing `from` while `to` is full; `from`'s FIN becomes `to`'s. */
function oneWay(from: Pausable, to: Side): void {
  from.on('data', (chunk: Buffer) => {
    if (to.write(chunk) === false && from.pause) {
      from.pause();
      to.once('drain', () => from.resume?.());
    }
  });
  from.once('end', () => to.end());
}

/** Both ways between two sides; an error on either ends both. */
function relay(a: Pausable, b: Pausable): void {
  oneWay(a, b);
  oneWay(b, a);
  const fail = (): void => {
    (a as Partial<Socket>).destroy?.();
    (b as Partial<Socket>).destroy?.();
  };
  a.once('error', fail);
  b.once('error', fail);
}

function dial(port: number): Socket {
  return netConnect({ port, host: '127.0.0.1', allowHalfOpen: true });
}

/** The reply to `{ cpu: true }`, and an exit when the parent is gone. */
function answerCpu(): void {
  process.on('message', (message: { cpu?: true }) => {
    if (message.cpu) process.send!({ cpu: cpuOf(process.cpuUsage()) });
  });
  process.once('disconnect', () => process.exit(0));
}

/** The forward route: accept, dial the server, relay. */
async function forwarder(echoPort: number): Promise<void> {
  const server = netServer({ allowHalfOpen: true }, (client) => relay(client, dial(echoPort)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send!({ port: (server.address() as AddressInfo).port });
}

/**
 * The proxy: a TLS listener for the agent's tunnels (the first is HTTP/2, the second the lean
 * framing) and a client listener for each; a client's stream names the echo server's port.
 */
async function proxy(echoPort: number, server: { cert: string; key: string }): Promise<void> {
  const tunnels = tlsServer({ cert: server.cert, key: server.key, ALPNProtocols: ['h2', 'lean'] });
  let session: ClientHttp2Session | undefined;
  let mux: LeanMux | undefined;
  tunnels.on('secureConnection', (socket) => {
    if (socket.alpnProtocol === 'h2') session = h2Connect('http://agent.tunnel', { createConnection: () => socket });
    else mux = new LeanMux(socket);
    if (session && mux) process.send!({ ready: true });
  });
  const target = `127.0.0.1:${echoPort}`;
  const viaH2 = netServer({ allowHalfOpen: true }, (client) => {
    relay(client, session!.request({ ':method': 'CONNECT', ':authority': target }, { endStream: false }));
  });
  const viaLean = netServer({ allowHalfOpen: true }, (client) => relay(client, mux!.open(target)));
  for (const listener of [tunnels, viaH2, viaLean]) await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const port = (listener: typeof tunnels | typeof viaH2): number => (listener.address() as AddressInfo).port;
  process.send!({ ports: { tunnels: port(tunnels), viaH2: port(viaH2), viaLean: port(viaLean) } });
}

/** The agent: dials the proxy's tunnels, and for each stream dials its target, answers, relays. */
function agent(tunnelPort: number, ca: string): void {
  const h2 = h2Server();
  h2.on('stream', (stream: ServerHttp2Stream, headers) => {
    const socket = dial(Number(String(headers[':authority']).split(':')[1]));
    socket.once('connect', () => {
      stream.respond({ ':status': 200 });
      relay(stream, socket);
    });
    socket.once('error', () => stream.close());
  });
  const h2Socket = tlsConnect({ port: tunnelPort, host: '127.0.0.1', ca, servername: 'localhost', ALPNProtocols: ['h2'] });
  h2Socket.once('secureConnect', () => h2.emit('connection', h2Socket));
  const leanSocket = tlsConnect({ port: tunnelPort, host: '127.0.0.1', ca, servername: 'localhost', ALPNProtocols: ['lean'] });
  const mux: LeanMux = new LeanMux(leanSocket, (stream: LeanStream, target: string) => {
    const socket = dial(Number(target.split(':')[1]));
    socket.once('connect', () => {
      mux.answer(stream, true);
      relay(stream, socket);
    });
    socket.once('error', () => mux.answer(stream, false));
  });
}

async function child(): Promise<void> {
  answerCpu();
  type Setup = { echoPort: number; server?: { cert: string; key: string }; tunnelPort?: number; ca?: string };
  const setup = JSON.parse(process.env.FLOOR_SETUP!) as Setup;
  if (values.role === 'forwarder') await forwarder(setup.echoPort);
  else if (values.role === 'proxy') await proxy(setup.echoPort, setup.server!);
  else agent(setup.tunnelPort!, setup.ca!);
}

/** A child in `role`; if it dies before the end, so does the run (no exchange would complete). */
function start(role: string, setup: Record<string, unknown>): ChildProcess {
  const child = fork(fileURLToPath(import.meta.url), ['--role', role], {
    execArgv: process.execArgv,
    env: { ...process.env, FLOOR_SETUP: JSON.stringify(setup) },
  });
  child.once('exit', (code, signal) => {
    if (finished) return;
    process.stderr.write(`tunnel-floor: the ${role} exited (${signal ?? code}) before the end\n`);
    process.exit(1);
  });
  return child;
}
let finished = false;

async function main(): Promise<void> {
  const echo = netServer({ allowHalfOpen: true }, answererTurns);
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  const echoPort = (echo.address() as AddressInfo).port;
  const { ca, server } = devCertificates();
  const forward = start('forwarder', { echoPort });
  const proxyProcess = start('proxy', { echoPort, server: { cert: server.cert, key: server.key } });
  const forwardPort = await fromChild<number>(forward, 'port');
  const ports = await fromChild<{ tunnels: number; viaH2: number; viaLean: number }>(proxyProcess, 'ports');
  const ready = fromChild<true>(proxyProcess, 'ready');
  const agentProcess = start('agent', { echoPort, tunnelPort: ports.tunnels, ca: ca.cert });
  await ready;

  const exchange = (port: number) => (): Promise<void> => openerTurns(dial(port), TURNS);
  const routes = [
    { name: 'forward: one process accepts, dials, relays', port: forwardPort, counted: [forward] },
    { name: 'through a tunnel on HTTP/2 (a CONNECT stream): proxy + agent', port: ports.viaH2, counted: [proxyProcess, agentProcess] },
    {
      name: 'through a tunnel on a lean framing (bench/lean-mux.ts): proxy + agent',
      port: ports.viaLean,
      counted: [proxyProcess, agentProcess],
    },
  ];
  for (const route of routes) await measure(WARMUP, CONCURRENCY, () => Promise.all(route.counted.map(childCpu)), exchange(route.port));
  // Alternated, so that a change of the machine's load falls on all three.
  const runs: number[][][] = routes.map(() => []);
  for (let round = 0; round < 3; round++) {
    for (const [i, route] of routes.entries()) {
      runs[i]!.push(await measure(CONNECTIONS, CONCURRENCY, () => Promise.all(route.counted.map(childCpu)), exchange(route.port)));
    }
  }
  const medians = runs.map(medianRun);
  const total = (run: number[]): number => run.reduce((a, b) => a + b, 0);
  const forwardCpu = total(medians[0]!);
  process.stdout.write(
    `Node ${process.version}, ${CONNECTIONS} connections of ${TURNS} turns × 3 rounds, ${CONCURRENCY} at a time; CPU µs per connection of the processes on the route (the round with the median total):\n\n`,
  );
  process.stdout.write('| route | CPU µs | by process | × forward |\n| --- | ---: | ---: | ---: |\n');
  for (const [i, route] of routes.entries()) {
    const run = medians[i]!;
    const split = run.map((us) => us.toFixed(1)).join(' + ');
    process.stdout.write(`| ${route.name} | ${total(run).toFixed(1)} | ${split} | ${(total(run) / forwardCpu).toFixed(2)}× |\n`);
  }
  finished = true;
  echo.close();
  for (const c of [forward, proxyProcess, agentProcess]) c.disconnect();
}

if (values.role) await child();
else await main();
