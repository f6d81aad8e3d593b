import { constants, type ClientHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError, toGateError } from '../errors.js';
import type { DialCancel } from '../transport/dial-cancel.js';
import { dialThenRelay } from '../transport/dial-then-relay.js';
import { splice } from '../transport/splice.js';
import { h2ErrorName } from './connect-request.js';
import { releaseStream } from './release-stream.js';
import type { CustomHandler } from '../handlers/types.js';
import type { OpenStreamOptions, TunnelRegistry } from './registry.js';
import { formatHostPort } from '../client/target.js';

/** Opens the stream for one client connection: this proxy's tunnel, or through a peer proxy. */
export type TunnelStreamOpener = (agent: string, target: string, options: OpenStreamOptions) => Promise<ClientHttp2Stream>;

export interface ViaTunnelOptions {
  /** Milliseconds the agent has to reach the target (default: the registry's). */
  openTimeoutMs?: number;
  /** How the stream is opened (default: `registry.open`, this proxy's tunnels only). */
  open?: TunnelStreamOpener;
}

/**
 * Fails the client connection with `error`: destroying the socket with it makes the multiplexer
 * record the code and log the connection once, with its route and byte counts.
 */
function failClient(client: Duplex, error: GateError): void {
  if (!client.destroyed) client.destroy(error);
}

/**
 * A handler whose upstream is `target` (`host:port`) as seen from agent `agent`: the client
 * connection is carried in one stream of that agent's tunnel. Put it where a `forward` would go
 * (after `terminate` for a database route). The client is held paused while the agent dials; if
 * the agent is not connected, refuses the target or cannot reach it, the client is closed with
 * GATE_ERR_AGENT_NOT_CONNECTED / GATE_ERR_AGENT_TARGET_DENIED / GATE_ERR_AGENT_STREAM_FAILED.
 * When the agent dies mid-stream the tunnel's streams are reset and each client is closed at once
 * with GATE_ERR_AGENT_STREAM_FAILED (never left hanging).
 */
export function viaTunnel(registry: TunnelRegistry, agent: string, target: string, options: ViaTunnelOptions = {}): CustomHandler {
  const open = options.open ?? ((name: string, to: string, o: OpenStreamOptions) => registry.open(name, to, o));
  return {
    kind: 'custom',
    handle: (client, info) => {
      const firstBytes = takeBuffered(client);
      return dialThenRelay<ClientHttp2Stream>(client, {
        dial: (cancel) =>
          open(
            agent,
            target,
            new ClientStreamOptions(cancel, formatHostPort(info.remote.address, info.remote.port), options.openTimeoutMs, firstBytes),
          ),
        release: releaseStream,
        fail: (err) => failClient(client, toGateError(err, ErrorCodes.AGENT_STREAM_FAILED)),
        relay: (stream) => relayStream(client, stream, agent, target),
      });
    },
  };
}

/**
 * The options a client's stream is opened with. `signal` is made only when read: the openers of
 * this library take `cancel` (no AbortSignal per connection); an opener of the caller's own that
 * reads `signal` still gets one that aborts when the client leaves.
 */
class ClientStreamOptions implements OpenStreamOptions {
  constructor(
    readonly cancel: DialCancel,
    readonly client: string,
    readonly timeoutMs: number | undefined,
    readonly firstBytes: Buffer | undefined,
  ) {}

  get signal(): AbortSignal {
    return this.cancel.signal;
  }
}

/**
 * What the paused client holds already (the peeked first bytes, put back by the multiplexer):
 * taken now to go with the CONNECT (OpenStreamOptions.firstBytes). Undefined when nothing is
 * buffered (a terminated client whose TLS has not delivered a record yet).
 */
function takeBuffered(client: Duplex): Buffer | undefined {
  if (client.readableLength === 0) return undefined;
  const bytes = client.read() as Buffer | null;
  return bytes ?? undefined;
}

/** The client and its tunnel stream, both ways; a stream that ends badly fails the client with why. */
function relayStream(client: Duplex, stream: ClientHttp2Stream, agent: string, target: string): void {
  // The session the stream runs in: the agent's tunnel, or the peering session to the proxy holding it.
  const session = stream.session;
  // Registered before splice's own 'close' listener, so the client is destroyed with the reason
  // (and the multiplexer logs it) rather than silently by splice.
  stream.once('close', () => {
    const clean = stream.rstCode === constants.NGHTTP2_NO_ERROR && stream.readableEnded && stream.writableFinished;
    if (clean || client.destroyed) return;
    const why =
      session && !session.destroyed && !session.closed
        ? `stream reset by the agent (${h2ErrorName(stream.rstCode)})`
        : `agent ${agent} disconnected`;
    failClient(client, new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${target} via agent ${agent}: ${why}`));
  });
  // A client that leaves early releases its stream with END_STREAM, never a reset. Both ways
  // coalesced: the stream's many small chunks per read, and no pause per client read.
  splice(client, stream, () => {}, undefined, { releaseB: (s) => releaseStream(s), coalesceA: true, coalesceB: true });
  // A client whose FIN came with its first bytes ended when takeBuffered emptied it, before
  // splice listened for 'end': its FIN is passed on here instead.
  if (client.readableEnded && !stream.writableEnded) stream.end();
  client.resume();
}
