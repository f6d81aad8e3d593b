/**
 * Fuzz targets: each takes one input and either returns (any verdict is fine as long as it is
 * consistent) or throws a FuzzFailure. A GateError is an accepted answer; any other throw, or an
 * answer that breaks an invariant, is a bug. Shared by the bounded test run and `npm run fuzz`.
 */
import { GateError } from '../../lib/errors.js';
import { parseClientHello } from '../../lib/tls/client-hello.js';
import { sniffGreeting } from '../../lib/sniff/greeting.js';
import {
  encodeProxyHeaderV1,
  encodeProxyHeaderV2,
  encodeProxyHeaderV2Local,
  parseProxyHeader,
  PP2_TYPE,
} from '../../lib/proxy-protocol/header.js';
import { Detector } from '../../lib/mux/detector.js';
import { Duplex } from 'node:stream';
import { ErrorCodes } from '../../lib/errors.js';
import { FramedSession, MAX_OWED_ANSWERS } from '../../lib/tunnel-framing/framed-session.js';
import {
  controlFrame,
  helloFrame,
  encodeAnswer,
  encodeGoAway,
  encodeOpen,
  encodeReset,
  encodeWindow,
  FLAG_END,
  FrameType,
  FrameError,
  WireError,
  wireErrorName,
} from '../../lib/tunnel-framing/frames.js';
import type { Prng } from '../helpers/prng.js';
import { loadHelloFixtures } from '../fixtures/hello-fixtures.js';
import { split } from './mutate.js';

export class FuzzFailure extends Error {
  override readonly name = 'FuzzFailure';
}

const MAX_HELLO = 16_384;
const RECORD_SLACK = 4096;

function accept(err: unknown): void {
  if (!(err instanceof GateError)) throw err;
}

export function fuzzClientHello(input: Buffer): string {
  try {
    const r = parseClientHello(input, { maxHandshakeBytes: MAX_HELLO });
    if (r.status === 'need') {
      if (!(r.bytes >= 1)) throw new FuzzFailure(`need ${r.bytes}`);
      return 'need';
    }
    if (r.hello.recordBytes > input.length) throw new FuzzFailure('hello longer than its input');
    if (r.hello.handshakeLength > MAX_HELLO) throw new FuzzFailure('hello over the cap accepted');
    return 'done';
  } catch (err) {
    accept(err);
    return 'error';
  }
}

export function fuzzGreeting(input: Buffer): string {
  const r = sniffGreeting(input);
  if (r.verdict === 'need' && !(r.bytes >= 1)) throw new FuzzFailure(`sniff need ${r.bytes}`);
  // A verdict must not change when more bytes follow (sniffers only look at a fixed prefix).
  if (r.verdict === 'match') {
    const again = sniffGreeting(Buffer.concat([input, Buffer.from('trailing')]));
    if (again.verdict !== 'match' || again.protocol !== r.protocol) throw new FuzzFailure(`match ${r.protocol} changed with more bytes`);
  }
  return r.verdict === 'match' ? `match:${r.protocol}` : r.verdict;
}

export function fuzzProxyHeader(input: Buffer): string {
  try {
    const r = parseProxyHeader(input);
    if (r.status === 'need') {
      if (!(r.bytes >= 1)) throw new FuzzFailure(`need ${r.bytes}`);
      return 'need';
    }
    const h = r.header;
    if (h.length > input.length || h.length < 15) throw new FuzzFailure(`header length ${h.length} of ${input.length}`);
    if (h.source && h.destination) {
      // What parses must re-encode (v1 text is canonical, so round-trip the endpoints).
      const again = parseProxyHeader(
        h.version === 1
          ? encodeProxyHeaderV1(h.source, h.destination)
          : encodeProxyHeaderV2(
              h.source,
              h.destination,
              h.tlvs.filter((x) => x.type !== PP2_TYPE.CRC32C),
            ),
      );
      if (
        again.status !== 'done' ||
        JSON.stringify([again.header.source, again.header.destination]) !== JSON.stringify([h.source, h.destination])
      )
        throw new FuzzFailure('round trip changed the endpoints');
    }
    return 'done';
  } catch (err) {
    accept(err);
    return 'error';
  }
}

/** The whole detection state machine, fed the input in random segments, in both PROXY modes. */
export function fuzzDetector(input: Buffer, rand: Prng): string {
  const proxyHeader = rand.chance(0.3) ? 'required' : 'refused';
  const detector = new Detector({ maxHelloBytes: MAX_HELLO, proxyHeader });
  let fed = 0;
  for (const piece of split(input, rand)) {
    fed += piece.length;
    const step = detector.feed(piece);
    if (detector.held > MAX_HELLO + RECORD_SLACK + 65_536) throw new FuzzFailure(`detector holds ${detector.held} bytes`);
    if (step.status === 'failed') {
      if (!(step.error instanceof GateError)) throw new FuzzFailure('failure without a GateError');
      return `failed:${step.error.code}`;
    }
    if (step.status === 'done') {
      const { detected } = step;
      if (detected.rest.length > fed) throw new FuzzFailure('rest longer than what was fed');
      if (proxyHeader === 'required' && !detected.proxyHeader) throw new FuzzFailure('routed without the required PROXY header');
      if (proxyHeader === 'refused' && detected.proxyHeader) throw new FuzzFailure('PROXY header accepted while refused');
      if (detected.protocol === 'tls' && !detected.hello) throw new FuzzFailure('tls without a hello');
      return `done:${detected.protocol}`;
    }
  }
  return 'need';
}

/** Streams the fuzzed session lets the other side hold open: small, so that the limit is reached. */
const FUZZ_MAX_STREAMS = 4;

/** The limits before admission, small so that the fuzzer reaches them (docs/tunnel-framing.md, "Limits"). */
const FUZZ_ADMISSION = { pings: 2, bytes: 4096, idleFrames: 4 };

/**
 * A framed tunnel session (lib/tunnel-framing) reading the input as the other side's bytes, in
 * random segments, on an in-memory connection: whatever comes, the session either stays open with
 * no more streams than its limit and no more answers owed than MAX_OWED_ANSWERS, or ends with
 * GATE_ERR_TUNNEL_PROTOCOL (a broken framing) or GATE_ERR_TUNNEL_FLOOD (a limit on work: answers
 * owed, idle frames, the limits before admission, which half the runs keep) and no stream left; it
 * never throws. Each stream it is offered is answered and echoed, so credit and FINs are spent.
 * The turn's writes are never flushed during a run, so every answer stays owed: the count bound
 * is reached by any input with enough PINGs.
 */
export function fuzzTunnelFrames(input: Buffer, rand: Prng): string {
  const socket = new Duplex({
    read() {},
    write(_chunk, _encoding, done) {
      done();
    },
  });
  const session = new FramedSession(socket, {
    side: 'dialer',
    maxConcurrentStreams: FUZZ_MAX_STREAMS,
    resetBurst: 8,
    streamWindow: 4096,
    connectionWindow: 16_384,
    ...(rand.chance(0.5) ? { untilAdmitted: FUZZ_ADMISSION } : {}),
    onOpen: (stream) => {
      stream.respond({ status: 200, code: '', reason: '' });
      stream.on('data', (chunk: Buffer) => stream.write(Buffer.from(chunk)));
      stream.once('end', () => stream.end());
      stream.resume();
    },
  });
  try {
    // The other side's HELLO first, as the framing asks: the input is what it sends after it.
    socket.emit('data', helloFrame({ streamWindow: 4096, connectionWindow: 16_384, maxStreams: FUZZ_MAX_STREAMS }));
    for (const piece of split(input, rand)) socket.emit('data', piece);
    // Read at once: 'close' itself waits for the socket after a GOAWAY, and this run is synchronous.
    const closedWith = session.closeError;
    if (!session.closed) {
      if (session.openStreams > FUZZ_MAX_STREAMS) throw new FuzzFailure(`${session.openStreams} streams open, past the limit`);
      if (session.owedAnswers > MAX_OWED_ANSWERS) throw new FuzzFailure(`${session.owedAnswers} answers owed, past the bound`);
      return 'done:open';
    }
    if (session.openStreams !== 0) throw new FuzzFailure(`${session.openStreams} streams left after the session closed`);
    if (
      !(closedWith instanceof FrameError) ||
      (closedWith.code !== ErrorCodes.TUNNEL_PROTOCOL && closedWith.code !== ErrorCodes.TUNNEL_FLOOD)
    )
      throw new FuzzFailure(`closed without a framing error: ${String(closedWith)}`);
    if (closedWith.code === ErrorCodes.TUNNEL_FLOOD && closedWith.wireCode !== WireError.ENHANCE_YOUR_CALM)
      throw new FuzzFailure(`a flood cut with ${wireErrorName(closedWith.wireCode)}`);
    return `closed:${wireErrorName(closedWith.wireCode)}`;
  } finally {
    socket.destroy();
  }
}

export type Target = 'client-hello' | 'greeting' | 'proxy-header' | 'detector' | 'tunnel-frames';

export function runTarget(target: Target, input: Buffer, rand: Prng): string {
  switch (target) {
    case 'client-hello':
      return fuzzClientHello(input);
    case 'greeting':
      return fuzzGreeting(input);
    case 'proxy-header':
      return fuzzProxyHeader(input);
    case 'detector':
      return fuzzDetector(input, rand);
    case 'tunnel-frames':
      return fuzzTunnelFrames(input, rand);
  }
}

/** Seeds: the captured ClientHellos, PROXY headers, every greeting the sniffers know. */
export function corpus(): Record<Target, Buffer[]> {
  const hellos = loadHelloFixtures().map((h) => h.bytes);
  const v4 = (a: string, p: number) => ({ address: a, port: p, family: 'IPv4' as const });
  const v6 = (a: string, p: number) => ({ address: a, port: p, family: 'IPv6' as const });
  const headers = [
    encodeProxyHeaderV1(v4('192.168.0.1', 56324), v4('192.168.0.11', 443)),
    encodeProxyHeaderV1(v6('2001:db8::1', 1), v6('::ffff:1.2.3.4', 65535)),
    Buffer.from('PROXY UNKNOWN\r\n'),
    encodeProxyHeaderV2(v4('10.0.0.1', 1), v4('10.0.0.2', 2), [], { crc32c: true }),
    encodeProxyHeaderV2(v6('fd00::1', 1), v6('fd00::2', 2), [
      { type: PP2_TYPE.AUTHORITY, value: Buffer.from('gate.test') },
      { type: PP2_TYPE.ALPN, value: Buffer.from('h2') },
    ]),
    encodeProxyHeaderV2Local(),
  ];
  const greetings = [
    Buffer.from('SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n'),
    Buffer.from('GET / HTTP/1.1\r\nHost: gate.test\r\n\r\n'),
    Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
    Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]), // SSLRequest
    Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30]), // GSSENCRequest
    Buffer.from([0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, 0, 0, 0, 1, 0, 0, 0, 2]), // CancelRequest
    Buffer.concat([Buffer.from([0, 0, 0, 0x17, 0, 3, 0, 0]), Buffer.from('user\0gate\0\0\0\0\0\0\0')]).subarray(0, 0x17), // StartupMessage
  ];
  const sslThenHello = hellos.map((h) => Buffer.concat([greetings[3]!, h]));
  const withHeader = hellos.flatMap((h) => headers.slice(0, 2).map((x) => Buffer.concat([x, h])));
  const open = (id: number, target: string): Buffer =>
    controlFrame(FrameType.OPEN, 0, id, encodeOpen({ kind: 0, target, client: '10.0.0.1:5000' }));
  const data = (id: number, text: string, flags = 0): Buffer => controlFrame(FrameType.DATA, flags, id, Buffer.from(text));
  const frames = [
    Buffer.concat([open(2, 'db:5432'), data(2, 'hello'), data(2, '', FLAG_END)]),
    Buffer.concat([
      open(2, 'a:1'),
      open(4, 'b:2'),
      controlFrame(FrameType.RESET, 0, 2, encodeReset({ code: 8, reason: 'bye' })),
      data(4, 'x'),
    ]),
    Buffer.concat([controlFrame(FrameType.PING, 0, 0, Buffer.alloc(8, 1)), controlFrame(FrameType.WINDOW, 0, 0, encodeWindow(1000))]),
    Buffer.concat([open(2, 'c:3'), controlFrame(FrameType.WINDOW, 0, 2, encodeWindow(70_000)), data(2, 'y'.repeat(3000))]),
    Buffer.concat([
      open(2, 'd:4'),
      controlFrame(FrameType.GOAWAY, 0, 0, encodeGoAway({ lastStreamId: 1, code: 0, reason: 'drain' })),
      open(4, 'e:5'),
    ]),
    // Our own stream ids are odd (the fuzzed session dials): an ANSWER for one never opened.
    controlFrame(FrameType.ANSWER, 0, 1, encodeAnswer({ status: 200, code: '', reason: '' })),
    // The limits on work: PINGs past the answers owed, empty DATA, one-byte WINDOWs.
    Buffer.concat(Array.from({ length: 1100 }, (_, i) => controlFrame(FrameType.PING, 0, 0, Buffer.alloc(8, i)))),
    Buffer.concat([open(2, 'f:6'), ...Array.from({ length: 1100 }, () => data(2, ''))]),
    Buffer.concat(Array.from({ length: 1100 }, () => controlFrame(FrameType.WINDOW, 0, 0, encodeWindow(1)))),
  ];
  return {
    'tunnel-frames': frames,
    'client-hello': hellos,
    greeting: [...greetings, ...headers, ...hellos],
    'proxy-header': headers,
    detector: [...hellos, ...greetings, ...headers, ...withHeader, ...sslThenHello],
  };
}
