// `npm run bench:tunnel-floor -- [--connections 4000] [--warmup 800] [--concurrency 64] [--turns 3]`:
// the central path's routes with none of gate-mux's code, to tell what a tunnel's framing costs
// a whole connection. A client connection carries the floor's exchange (bench/floor-exchange.ts)
// to an echo server:
//
// - forward: one process accepts it, dials the server and relays both ways (the forward route);
// - through a local tunnel on HTTP/2: a proxy process accepts it and opens a CONNECT stream on the
//   HTTP/2 session over the TLS connection an agent process dialled; the agent dials the server on
//   the stream and answers 200; each relays its two ends;
// - through a peer on HTTP/2: the proxy opens the stream on a peering session to a holder process,
//   which opens one on the agent's tunnel to it, answers once the agent did, and relays the two;
// - both tunnelled routes again on the tunnel framing of our own (lib/tunnel-framing).
//
// Every relay is the same few lines on Node's sockets and streams, so the routes differ only in
// how the tunnel carries a connection. The CPU counted is that of every process on the route; the
// clients and the echo server (this process) are not counted.
//
// Why: the aims for the tunnelled routes are ≤ 2× (local) and ≤ 3× (peered) the forward route's
// CPU per connection (BENCHMARKS.md). This tells whether routes on HTTP/2 can meet them at all,
// and whether a framing of our own could.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import {
  connect as h2Connect,
  createServer as h2Server,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type ServerHttp2Stream,
} from 'node:http2';
import { connect as netConnect, createServer as netServer, type Socket } from 'node:net';
import { createServer as tlsServer, connect as tlsConnect, type TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { devCertificates } from '../lib/pki/dev-certificates.js';
import { answerCpuAsks, answererTurns, childCpu, fromChild, measure, medianRun, openerTurns, type Side } from './floor-exchange.js';
import { FramedSession } from '../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../lib/tunnel-framing/framed-stream.js';
import { type OpenPayload, StreamKind } from '../lib/tunnel-framing/frames.js';
import { Multiplexer } from '../lib/mux/multiplexer.js';
import { BARE_CLIENT, type BareClientHook } from '../lib/handlers/bare-client.js';
import type { CustomHandler } from '../lib/handlers/types.js';
import { FramedRelay, releaseFramedStream } from '../lib/tunnel-framing/framed-relay.js';
import { spliceFramed } from '../lib/tunnel-framing/framed-splice.js';
import { serveAgentStream } from '../lib/tunnel/agent-stream.js';
import { awaitFramedAnswer } from '../lib/tunnel/framed-answer.js';
import { componentLogger } from '../lib/log.js';
import { formatHostPort } from '../lib/client/target.js';
import { ErrorCodes, GateError } from '../lib/errors.js';
import { centralPathPeers, GATE_MUX_NODE_FLAGS, type PeerContext, type RunningPeer } from './peers.js';
import { descendants, threadsCpuMicros } from './proc.js';
import { listening } from '../test/helpers/net.js';

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
  // A framed stream starts paused (it holds what came before its reader was ready): start both.
  a.resume?.();
  b.resume?.();
}

function dial(port: number): Socket {
  return netConnect({ port, host: '127.0.0.1', allowHalfOpen: true });
}

/** The forward route: accept, dial the server, relay. */
async function forwarder(echoPort: number): Promise<void> {
  const server = netServer({ allowHalfOpen: true }, (client) => relay(client, dial(echoPort)));
  process.send!({ port: await listening(server) });
}

interface Certs {
  cert: string;
  key: string;
  ca: string;
}

/** What a child is told at its start (FLOOR_SETUP). */
interface Setup {
  echoPort: number;
  certs: Certs;
  /** The holder's peering listener, for the proxy. */
  peeringPort?: number;
  /** The proxy's and the holder's tunnel listeners, for the agent. */
  tunnelPorts?: number[];
}

/** The two ends a side opens streams on: an HTTP/2 session and a framed session, each on its own TLS connection. */
interface Openers {
  session: ClientHttp2Session;
  framed: FramedSession;
}

/** A connect stream to `target` on a framed session. */
function openConnect(session: FramedSession, target: string): FramedStream {
  return session.open({ kind: StreamKind.CONNECT, target, client: '' });
}

/** The CONNECT for `target` on an HTTP/2 session. */
function connectStream(session: ClientHttp2Session, target: string): ClientHttp2Stream {
  return session.request({ ':method': 'CONNECT', ':authority': target }, { endStream: false });
}

/**
 * A TLS listener whose connections, by their ALPN, become the HTTP/2 session ('h2') or the framed
 * session ('framed') this side opens streams on: an agent's tunnels. Resolves once both are up.
 */
async function tunnelListener(certs: Certs): Promise<{ port: number; openers: Promise<Openers> }> {
  const listener = tlsServer({ cert: certs.cert, key: certs.key, ALPNProtocols: ['h2', 'framed'] });
  const openers = new Promise<Openers>((resolve) => {
    let session: ClientHttp2Session | undefined;
    let framed: FramedSession | undefined;
    listener.on('secureConnection', (socket) => {
      if (socket.alpnProtocol === 'h2') session = h2Connect('http://tunnel', { createConnection: () => socket });
      else framed = new FramedSession(socket, { side: 'listener' });
      if (session && framed) resolve({ session, framed });
    });
  });
  return { port: await listening(listener), openers };
}

/** Both kinds of connection to a listener of the other side, with `serve` taking each once up. */
function dialBoth(listenerPort: number, certs: Certs, serve: (socket: TLSSocket) => void): Promise<void> {
  const up = ['h2', 'framed'].map(
    (alpn) =>
      new Promise<void>((resolve) => {
        const socket = tlsConnect({ port: listenerPort, host: '127.0.0.1', ca: certs.ca, servername: 'localhost', ALPNProtocols: [alpn] });
        socket.once('secureConnect', () => {
          serve(socket);
          resolve();
        });
      }),
  );
  return Promise.all(up).then(() => undefined);
}

/**
 * The side that answers streams on a TLS connection it dialled or accepted: an HTTP/2 server for
 * 'h2', a framed session for 'framed'. `onStream` gets each stream, its target and how to answer it.
 */
function answerStreams(
  socket: TLSSocket,
  side: 'dialer' | 'listener',
  onStream: (stream: Pausable, target: string, answer: (ok: boolean) => void) => void,
): void {
  if (socket.alpnProtocol === 'h2') {
    const h2 = h2Server();
    h2.on('stream', (stream: ServerHttp2Stream, headers) =>
      onStream(stream, String(headers[':authority']), (ok) => (ok ? stream.respond({ ':status': 200 }) : stream.close())),
    );
    h2.emit('connection', socket);
    return;
  }
  new FramedSession(socket, {
    side,
    onOpen: (stream, open) => onStream(stream, open.target, (ok) => stream.respond({ status: ok ? 200 : 502, code: '', reason: '' })),
  });
}

/**
 * The proxy: the agent's tunnels, the peering connections it dials to the holder, and a client
 * listener per route: through its own tunnel (HTTP/2, framed) and through the holder's (HTTP/2, framed).
 */
async function proxy(setup: Setup): Promise<void> {
  const tunnels = await tunnelListener(setup.certs);
  const peering: Partial<Openers> = {};
  const peered = dialBoth(setup.peeringPort!, setup.certs, (socket) => {
    if (socket.alpnProtocol === 'h2') peering.session = h2Connect('http://holder', { createConnection: () => socket });
    else peering.framed = new FramedSession(socket, { side: 'dialer' });
  });
  const target = `127.0.0.1:${setup.echoPort}`;
  let openers: Openers | undefined;
  const routes = {
    viaH2: (client: Socket) => relay(client, connectStream(openers!.session, target)),
    viaFramed: (client: Socket) => relay(client, openConnect(openers!.framed, target)),
    viaH2Peer: (client: Socket) => relay(client, connectStream(peering.session!, target)),
    viaFramedPeer: (client: Socket) => relay(client, openConnect(peering.framed!, target)),
  };
  const ports: Record<string, number> = { tunnels: tunnels.port };
  for (const [name, route] of Object.entries(routes)) {
    const server = netServer({ allowHalfOpen: true }, route);
    ports[name] = await listening(server);
  }
  process.send!({ ports });
  [openers] = await Promise.all([tunnels.openers, peered]);
  process.send!({ ready: true });
}

/**
 * The holder: the agent's tunnels, and a peering listener on which the proxy opens streams; each
 * is carried on in a stream of the agent's tunnel of the same kind, answered once the agent answered.
 */
async function holder(setup: Setup): Promise<void> {
  const tunnels = await tunnelListener(setup.certs);
  let openers: Openers | undefined;
  const peering = tlsServer({ cert: setup.certs.cert, key: setup.certs.key, ALPNProtocols: ['h2', 'framed'] }, (socket) =>
    answerStreams(socket, 'listener', (stream, target, answer) => {
      const onward: Pausable =
        socket.alpnProtocol === 'h2' ? connectStream(openers!.session, target) : openConnect(openers!.framed, target);
      onward.once('response', () => {
        answer(true);
        relay(stream, onward);
      });
    }),
  );
  process.send!({ ports: { tunnels: tunnels.port, peering: await listening(peering) } });
  openers = await tunnels.openers;
  process.send!({ ready: true });
}

/** The agent: dials the proxy's and the holder's tunnels; for each stream dials its target, answers, relays. */
async function agent(setup: Setup): Promise<void> {
  const serve = (socket: TLSSocket): void =>
    answerStreams(socket, 'dialer', (stream, target, answer) => {
      const upstream = dial(Number(target.split(':')[1]));
      upstream.once('connect', () => {
        answer(true);
        relay(stream, upstream);
      });
      upstream.once('error', () => answer(false));
    });
  await Promise.all(setup.tunnelPorts!.map((tunnelPort) => dialBoth(tunnelPort, setup.certs, serve)));
}

// --- gate-mux's relays on the tunnel framing: what its tunnelled routes will cost on it ---
//
// The pieces the product would use, joined here before they are in the product: the multiplexer
// (accept, the ClientHello read, the route) hands the client on its bare handle to a FramedRelay
// (lib/tunnel-framing/framed-relay.ts) on a stream of the agent's framed tunnel, or of a framed
// peering session to a holder; the holder carries each peering stream into a stream of the
// agent's tunnel, frame by frame; the agent dials its target as a bare handle and relays it with
// a FramedRelay. No admission, descriptions or heartbeat: per-connection work only.

/** The route handler: the client's handle relayed to a new stream of `session()` to `target`. */
function framedRoute(session: () => FramedSession, target: string): CustomHandler & { [BARE_CLIENT]: BareClientHook } {
  return {
    kind: 'custom',
    [BARE_CLIENT]: (client, rest, conn) => {
      // The stream is written at once, before the agent's answer: the agent holds the client's
      // first flight until it has dialled.
      const stream = session().open({
        kind: StreamKind.CONNECT,
        target,
        client: formatHostPort(conn.info.remote.address, conn.info.remote.port),
      });
      const relay: FramedRelay = new FramedRelay(client.take(), stream, {
        release: releaseFramedStream,
        onClose: () => conn.closed(relay),
      });
      conn.handOver(relay, relay);
      relay.start(rest);
      // The answer is awaited beside the relay, for its code (a refusal) and its deadline, as the
      // proxy's opener (lib/tunnel/framed-answer.ts) does: the client's bytes wait for nothing.
      awaitFramedAnswer(stream, {
        timeoutMs: 15_000,
        where: target,
        refused: (refusal) => new GateError(ErrorCodes.AGENT_STREAM_FAILED, refusal.message),
        lost: () => new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'lost'),
        timedOut: () => new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'no answer'),
      }).catch((err: GateError) => conn.recordError(err));
    },
    handle: (socket) => {
      socket.destroy();
    },
  };
}

/** Streams opened on `socket` carried into new streams of `to()`, frame by frame (spliceFramed). */
function carryStreams(socket: TLSSocket, to: () => FramedSession): FramedSession {
  return new FramedSession(socket, { side: 'listener', onOpen: (inbound, open) => spliceFramed(inbound, to().open(open)) });
}

/** A TLS listener whose one connection is the agent's framed tunnel. */
async function framedTunnelListener(certs: Certs): Promise<{ port: number; session: Promise<FramedSession> }> {
  const listener = tlsServer({ cert: certs.cert, key: certs.key, ALPNProtocols: ['framed'] });
  const session = new Promise<FramedSession>((resolve) =>
    listener.once('secureConnection', (socket) => resolve(new FramedSession(socket, { side: 'listener' }))),
  );
  return { port: await listening(listener), session };
}

/** The gate-mux proxy on the framing: a multiplexer per route, the agent's tunnel, a peering session. */
async function gateMuxFramedProxy(setup: Setup): Promise<void> {
  const tunnel = await framedTunnelListener(setup.certs);
  const peering = tlsConnect({
    port: setup.peeringPort!,
    host: '127.0.0.1',
    ca: setup.certs.ca,
    servername: 'localhost',
    ALPNProtocols: ['framed'],
  });
  const peeringSession = new FramedSession(peering, { side: 'dialer' });
  const target = `127.0.0.1:${setup.echoPort}`;
  let local: FramedSession | undefined;
  const match = { sni: 'bench.local', alpn: 'gate-bench' };
  const ports: Record<string, number> = { tunnels: tunnel.port };
  for (const [name, session] of [
    ['local', () => local!],
    ['peered', () => peeringSession],
  ] as const) {
    const mux = new Multiplexer({ routes: [{ name, match, handler: framedRoute(session, target) }] });
    ports[name] = (await mux.listen({ host: '127.0.0.1', port: 0, backlog: 4096 })).port;
  }
  process.send!({ ports });
  local = await tunnel.session;
  process.send!({ ready: true });
}

/** The gate-mux holder on the framing: peering streams carried into the agent's tunnel. */
async function gateMuxFramedHolder(setup: Setup): Promise<void> {
  const tunnel = await framedTunnelListener(setup.certs);
  let agentSession: FramedSession | undefined;
  const peering = tlsServer({ cert: setup.certs.cert, key: setup.certs.key, ALPNProtocols: ['framed'] }, (socket) =>
    carryStreams(socket, () => agentSession!),
  );
  process.send!({ ports: { tunnels: tunnel.port, peering: await listening(peering) } });
  agentSession = await tunnel.session;
  process.send!({ ready: true });
}

/** The gate-mux agent on the framing: each stream's target dialled as a bare handle and relayed. */
async function gateMuxFramedAgent(setup: Setup): Promise<void> {
  // The agent's own per-stream code: the policy check, the dial on a bare handle, the answer, the relay.
  const options = { allow: () => true, dialTimeoutMs: 5_000, log: componentLogger(undefined, 'agent'), track: () => undefined };
  const serve = (stream: FramedStream, open: OpenPayload): void => serveAgentStream(stream, open, options);
  await Promise.all(
    setup.tunnelPorts!.map(
      (port) =>
        new Promise<void>((resolve) => {
          const socket = tlsConnect({ port, host: '127.0.0.1', ca: setup.certs.ca, servername: 'localhost', ALPNProtocols: ['framed'] });
          socket.once('secureConnect', () => {
            new FramedSession(socket, { side: 'dialer', onOpen: serve });
            resolve();
          });
        }),
    ),
  );
}

async function child(): Promise<void> {
  answerCpuAsks();
  const setup = JSON.parse(process.env.FLOOR_SETUP!) as Setup;
  if (values.role === 'forwarder') await forwarder(setup.echoPort);
  else if (values.role === 'proxy') await proxy(setup);
  else if (values.role === 'holder') await holder(setup);
  else if (values.role === 'gm-proxy') await gateMuxFramedProxy(setup);
  else if (values.role === 'gm-holder') await gateMuxFramedHolder(setup);
  else if (values.role === 'gm-agent') await gateMuxFramedAgent(setup);
  else await agent(setup);
}

/** A child in `role`; if it dies before the end, so does the run (no exchange would complete). */
function start(role: string, setup: Record<string, unknown>): ChildProcess {
  const child = fork(fileURLToPath(import.meta.url), ['--role', role], {
    // The flags gate-mux's bench routers run with, so that only the code differs.
    execArgv: [...process.execArgv, ...GATE_MUX_NODE_FLAGS],
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
  const echoPort = await listening(echo);
  const { ca, server } = devCertificates();
  const certs: Certs = { cert: server.cert, key: server.key, ca: ca.cert };
  const forward = start('forwarder', { echoPort, certs });
  const holderProcess = start('holder', { echoPort, certs });
  const holderPorts = await fromChild<{ tunnels: number; peering: number }>(holderProcess, 'ports');
  const proxyProcess = start('proxy', { echoPort, certs, peeringPort: holderPorts.peering });
  const forwardPort = await fromChild<number>(forward, 'port');
  const ports = await fromChild<Record<string, number>>(proxyProcess, 'ports');
  const ready = Promise.all([fromChild<true>(proxyProcess, 'ready'), fromChild<true>(holderProcess, 'ready')]);
  const agentProcess = start('agent', { echoPort, certs, tunnelPorts: [ports.tunnels, holderPorts.tunnels] });
  await ready;
  const gmHolder = start('gm-holder', { echoPort, certs });
  const gmHolderPorts = await fromChild<{ tunnels: number; peering: number }>(gmHolder, 'ports');
  const gmProxy = start('gm-proxy', { echoPort, certs, peeringPort: gmHolderPorts.peering });
  const gmPorts = await fromChild<Record<string, number>>(gmProxy, 'ports');
  const gmReady = Promise.all([fromChild<true>(gmProxy, 'ready'), fromChild<true>(gmHolder, 'ready')]);
  const gmAgent = start('gm-agent', { echoPort, certs, tunnelPorts: [gmPorts.tunnels, gmHolderPorts.tunnels] });
  await gmReady;

  // gate-mux's own routes, the rate workload's central path, with the echo server as upstream A.
  const dir = mkdtempSync(join(tmpdir(), 'gate-mux-tunnel-floor-'));
  const ctx: PeerContext = {
    dir,
    distDir: fileURLToPath(new URL('..', import.meta.url)),
    upstreamA: echoPort,
    upstreamB: echoPort,
    cpus: undefined,
  };
  const gateMux: RunningPeer[] = [];
  for (const peer of centralPathPeers()) gateMux.push(await peer.start(ctx));
  const [gateMuxForward, gateMuxLocal, gateMuxPeered] = gateMux as [RunningPeer, RunningPeer, RunningPeer];

  const ofChildren = (children: ChildProcess[]) => (): Promise<number[]> => Promise.all(children.map(childCpu));
  // A gate-mux router's tree (the router, then its holder and agent), read from /proc.
  const ofTree = (peer: RunningPeer) => {
    const pids = [peer.pid!, ...descendants(peer.pid!)];
    return (): Promise<number[]> => Promise.resolve(pids.map(threadsCpuMicros));
  };
  const local = [proxyProcess, agentProcess];
  const peered = [proxyProcess, holderProcess, agentProcess];
  // `base`: the row whose CPU the route's ratio is taken against, its own kind's forward route.
  const routes = [
    { name: 'Node: forward (one process accepts, dials, relays)', port: forwardPort, cpu: ofChildren([forward]), base: 0 },
    { name: 'Node: local tunnel on HTTP/2 (a CONNECT stream): proxy + agent', port: ports.viaH2!, cpu: ofChildren(local), base: 0 },
    {
      name: 'Node: local tunnel on the tunnel framing (lib/tunnel-framing): proxy + agent',
      port: ports.viaFramed!,
      cpu: ofChildren(local),
      base: 0,
    },
    { name: 'Node: peered on HTTP/2: proxy + holder + agent', port: ports.viaH2Peer!, cpu: ofChildren(peered), base: 0 },
    { name: 'Node: peered on the tunnel framing: proxy + holder + agent', port: ports.viaFramedPeer!, cpu: ofChildren(peered), base: 0 },
    { name: 'gate-mux: forward', port: gateMuxForward.port, cpu: ofTree(gateMuxForward), base: 5 },
    { name: 'gate-mux: local tunnel (HTTP/2): proxy + agent', port: gateMuxLocal.port, cpu: ofTree(gateMuxLocal), base: 5 },
    { name: 'gate-mux: peered (HTTP/2): proxy + holder + agent', port: gateMuxPeered.port, cpu: ofTree(gateMuxPeered), base: 5 },
    {
      name: "gate-mux's relays on the tunnel framing: local tunnel: proxy + agent",
      port: gmPorts.local!,
      cpu: ofChildren([gmProxy, gmAgent]),
      base: 5,
    },
    {
      name: "gate-mux's relays on the tunnel framing: peered: proxy + holder + agent",
      port: gmPorts.peered!,
      cpu: ofChildren([gmProxy, gmHolder, gmAgent]),
      base: 5,
    },
  ];
  const exchange = (port: number) => (): Promise<void> => openerTurns(dial(port), TURNS);
  for (const route of routes) await measure(WARMUP, CONCURRENCY, route.cpu, exchange(route.port));
  // Alternated, so that a change of the machine's load falls on every route.
  const runs: number[][][] = routes.map(() => []);
  for (let round = 0; round < 3; round++) {
    for (const [i, route] of routes.entries()) runs[i]!.push(await measure(CONNECTIONS, CONCURRENCY, route.cpu, exchange(route.port)));
  }
  const medians = runs.map(medianRun);
  const total = (run: number[]): number => run.reduce((a, b) => a + b, 0);
  process.stdout.write(
    `Node ${process.version}, ${CONNECTIONS} connections of ${TURNS} turns × 3 rounds, ${CONCURRENCY} at a time; CPU µs per connection of the processes on the route (the round with the median total):\n\n`,
  );
  process.stdout.write('| route | CPU µs | by process | × its forward |\n| --- | ---: | ---: | ---: |\n');
  for (const [i, route] of routes.entries()) {
    const run = medians[i]!;
    const split = run.map((us) => us.toFixed(1)).join(' + ');
    const ratio = total(run) / total(medians[route.base]!);
    process.stdout.write(`| ${route.name} | ${total(run).toFixed(1)} | ${split} | ${ratio.toFixed(2)}× |\n`);
  }
  finished = true;
  echo.close();
  for (const c of [forward, proxyProcess, holderProcess, agentProcess, gmProxy, gmHolder, gmAgent]) c.disconnect();
  for (const peer of gateMux) await peer.stop();
  rmSync(dir, { recursive: true, force: true });
}

if (values.role) await child();
else await main();
