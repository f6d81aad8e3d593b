// A client that leaves while its tunnel stream is being opened, and an agent that never answers,
// on a local tunnel and through a holder proxy: the departed client's stream is let go with a FIN,
// never reset (a run of resets trips the agent's rapid-reset defence, see
// lib/tunnel/tunnel-stream.ts) and nobody is told a failure; an answer that never comes fails the
// client with its code, and the stream is let go with a FIN too. The proxies cancel through DialCancel, not an AbortSignal per
// connection; an opener of the caller's own that reads `signal` still gets one that aborts.
import t from 'tap';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { ErrorCodes } from '../../lib/errors.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { type OpenPayload, WireError } from '../../lib/tunnel-framing/frames.js';
import type { TunnelRegistry } from '../../lib/tunnel/registry.js';
import { handMadeAgent, peeredProxies, proxyViaAgent } from '../helpers/hand-made-agent.js';
import { until } from '../helpers/net.js';

const TARGET = '127.0.0.1:9';
// A client "leaves" by resetting its connection: a FIN alone is a half-close (the client may still
// want its answer), which the held client does not even read until it is relayed.
const REQUEST = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n';

/** An HTTP/1 client through the proxy on `port` that has sent its request and waits, and its stream at the agent. */
async function waitingClient(
  port: number,
  agent: { nextConnect: () => Promise<[FramedStream, OpenPayload]> },
): Promise<{ client: Socket; stream: FramedStream }> {
  const streamP = agent.nextConnect();
  const client = connect({ port, host: '127.0.0.1' });
  client.on('error', () => {});
  client.write(REQUEST);
  const [stream] = await streamP;
  return { client, stream };
}

/** Answers the agent's stream 200 once the proxy has ended its side, then ends it too: its close code. */
async function answerAfterRelease(stream: FramedStream): Promise<number> {
  const ended = once(stream, 'end');
  stream.resume();
  await ended;
  stream.respond({ status: 200, code: '', reason: '' });
  const closed = once(stream, 'close');
  stream.end();
  await closed;
  return stream.closeCode ?? WireError.NO_ERROR;
}

t.test('a client that leaves before the agent answers: its stream released with a FIN, no failure of ours', async (t) => {
  const side = await proxyViaAgent(t, 'agent-left', TARGET);
  const raw = await handMadeAgent(t, side.port, side.registry, 'agent-left');
  const { client, stream } = await waitingClient(side.port, raw);
  client.resetAndDestroy();
  t.equal(await answerAfterRelease(stream), WireError.NO_ERROR, 'the stream ended cleanly both ways');
  t.equal(side.registry.streamStats.reset, 0, 'no reset');
  t.same(side.mux.stats().failures, { [ErrorCodes.CLIENT_RESET]: 1 }, "only the client's own reset is counted");
});

t.test('an agent that never answers: the client is closed with GATE_ERR_AGENT_STREAM_FAILED, the stream released', async (t) => {
  const side = await proxyViaAgent(t, 'agent-mute', TARGET, { registry: { openTimeoutMs: 300 } });
  const raw = await handMadeAgent(t, side.port, side.registry, 'agent-mute');
  const { client, stream } = await waitingClient(side.port, raw);
  // A slow target is no abuse: the proxy lets the stream go with a FIN (framed-answer.ts), which
  // spends none of the agent's reset budget, rather than resetting it.
  const ended = once(stream, 'end');
  stream.resume();
  await ended;
  t.notOk(stream.closed, 'not reset: the stream waits for the answer, its side ended');
  // The client reads the proxy's answer (a 502 naming the code), then the close.
  let said = '';
  client.on('data', (d: Buffer) => (said += d.toString('latin1')));
  if (!client.closed) await once(client, 'close');
  t.match(said, /^HTTP\/1\.1 502 Bad Gateway\r\n[\s\S]*GATE_ERR_AGENT_STREAM_FAILED/, 'told why, in HTTP');
  await until(() => side.mux.stats().failures[ErrorCodes.AGENT_STREAM_FAILED] === 1, 'the timeout recorded with its code');
});

t.test("an opener of the caller's own that reads `signal` gets one, aborted when the client leaves", async (t) => {
  let registry: TunnelRegistry | undefined;
  const signals: AbortSignal[] = [];
  const side = await proxyViaAgent(t, 'agent-own', TARGET, {
    via: {
      open: (name, to, options) => {
        signals.push(options.signal!);
        return registry!.open(name, to, { signal: options.signal!, ...(options.client ? { client: options.client } : {}) });
      },
    },
  });
  registry = side.registry;
  const raw = await handMadeAgent(t, side.port, side.registry, 'agent-own');
  const { client, stream } = await waitingClient(side.port, raw);
  t.equal(signals.length, 1);
  t.equal(signals[0]!.aborted, false, 'not aborted while the client waits');
  client.resetAndDestroy();
  t.equal(await answerAfterRelease(stream), WireError.NO_ERROR, 'released through the signal, cleanly');
  t.equal(signals[0]!.aborted, true, 'the signal aborted with the client');
  t.equal(side.registry.streamStats.reset, 0);
});

t.test('through a holder: a client that leaves before the agent answers causes no reset anywhere', async (t) => {
  const side = await peeredProxies(t, 'agent-peer-left', TARGET);
  const raw = await handMadeAgent(t, side.holderPort, side.registry, 'agent-peer-left');
  const { client, stream } = await waitingClient(side.frontPort, raw);
  client.resetAndDestroy();
  await until(() => side.front.stats().open === 0, 'the front proxy let the client go');
  // The front released its stream to the holder with a FIN; the holder passes that on once the
  // agent has answered (to the holder it is a half-close, as a client's early FIN would be).
  stream.respond({ status: 200, code: '', reason: '' });
  const ended = once(stream, 'end');
  stream.resume();
  await ended;
  const closed = once(stream, 'close');
  stream.end();
  await closed;
  t.equal(stream.closeCode ?? WireError.NO_ERROR, WireError.NO_ERROR, "the agent's stream ended cleanly both ways");
  t.equal(side.registry.streamStats.reset, 0, 'the holder reset nothing');
  t.same(side.front.stats().failures, { [ErrorCodes.CLIENT_RESET]: 1 }, "only the client's own reset is counted at the front");
});
