import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError, toGateError } from '../errors.js';
import { DialCancel } from '../transport/dial-cancel.js';
import { dialThenRelay } from '../transport/dial-then-relay.js';
import { splice } from '../transport/splice.js';
import { FramedRelay, type FramedRelayFailure, releaseFramedStream } from '../tunnel-framing/framed-relay.js';
import { errnoError } from '../transport/uv.js';
import type { ClientReader, HandleEnd } from '../transport/client-end.js';
import type { Endpoint } from '../transport/endpoint.js';
import { BARE_CLIENT, type BareClientHook, type WatchRelay } from '../handlers/bare-client.js';
import type { ConnectionParts } from '../handlers/context.js';
import { type RefusalChoice, refuseClient, refusalFor } from '../handlers/refuse.js';
import { closedCleanly, failureReason, releaseTunnelStream, type TunnelStream, tunnelDuplex } from './tunnel-stream.js';
import type { CustomHandler } from '../handlers/types.js';
import type { OpenStreamOptions, TunnelRegistry } from './registry.js';
import type { RefusalProtocol } from '../refusals/protocols.js';
import { formatHostPort } from '../client/target.js';

/** Opens the stream for one client (at `remote`), until `cancel`; `firstBytes` go with its OPEN. */
type StreamOpen = (remote: Endpoint, cancel: DialCancel, firstBytes: Buffer | undefined) => Promise<TunnelStream>;

/** Opens the stream for one client connection: this proxy's tunnel, or through a peer proxy. */
export type TunnelStreamOpener = (agent: string, target: string, options: OpenStreamOptions) => Promise<TunnelStream>;

export interface ViaTunnelOptions {
  /** Milliseconds the agent has to reach the target (default: the registry's). */
  openTimeoutMs?: number;
  /** How the stream is opened (default: `registry.open`, this proxy's tunnels only). */
  open?: TunnelStreamOpener;
  /**
   * The protocol a client whose stream cannot be opened is told why in (agent offline, target
   * refused, ...): `postgres`, `mysql`, `redis`, `mongodb`, `ssh`, `http`, or `none` for a bare
   * close. Default: what the connection shows (its ALPN, its plaintext greeting). A client whose
   * TLS the proxy did not end is never answered.
   */
  refusal?: RefusalChoice;
  /**
   * Called on the failure path only, with the error a stream could not be opened with: returns the
   * error the connection fails with (the proxy turns "offline" into "refused for its version" for
   * an agent it just refused at admission). Default: the error itself.
   */
  explain?: (error: GateError) => GateError;
}

/**
 * Fails the client connection with `error`: destroying the socket with it makes the multiplexer
 * record the code and log the connection once, with its route and byte counts. A client whose
 * stream could not be opened is first told why in `protocol`, when there is one.
 */
function failClient(client: Duplex, error: GateError, protocol?: RefusalProtocol, first?: Buffer, agent?: string): void {
  if (protocol) refuseClient(client, error, protocol, first, agent);
  else if (!client.destroyed) client.destroy(error);
}

/**
 * A handler whose upstream is `target` (`host:port`) as seen from agent `agent`: the client
 * connection is carried in one stream of that agent's tunnel. Put it where a `forward` would go
 * (after `terminate` for a database route). The client is held paused while the agent dials; if
 * the agent is not connected, refuses the target or cannot reach it, the client is told why in its
 * protocol where it can be (`refusal`; handlers/refuse.ts) and closed with GATE_ERR_AGENT_OFFLINE /
 * GATE_ERR_AGENT_TARGET_DENIED / GATE_ERR_AGENT_STREAM_FAILED.
 * When the agent dies mid-stream the tunnel's streams are reset and each client is closed at once
 * with GATE_ERR_AGENT_STREAM_FAILED (never left hanging).
 */
export function viaTunnel(registry: TunnelRegistry, agent: string, target: string, options: ViaTunnelOptions = {}): CustomHandler {
  const open = options.open ?? ((name: string, to: string, o: OpenStreamOptions) => registry.open(name, to, o));
  const openFor: StreamOpen = (remote, cancel, firstBytes) =>
    open(agent, target, new ClientStreamOptions(cancel, formatHostPort(remote.address, remote.port), options.openTimeoutMs, firstBytes));
  const { refusal } = options;
  const explain = options.explain ?? ((error: GateError) => error);
  // The bare-client hook is internal plumbing (handlers/bare-client.ts), so the public return type is
  // the plain CustomHandler (issue 39); the multiplexer finds the hook by its symbol.
  const handler: CustomHandler & { [BARE_CLIENT]: BareClientHook } = {
    kind: 'custom',
    // A passthrough client still on its bare handle is relayed to the stream by a FramedRelay.
    [BARE_CLIENT]: (client, rest, conn, watch) =>
      new BareTunnelClient(client, conn, agent, target, watch, refusal, explain).open(openFor, rest),
    handle: (client, info) => {
      const firstBytes = takeBuffered(client);
      return dialThenRelay<TunnelStream>(client, {
        dial: (cancel) => openFor(info.remote, cancel, firstBytes),
        release: releaseTunnelStream,
        fail: (err) =>
          failClient(
            client,
            explain(toGateError(err, ErrorCodes.AGENT_STREAM_FAILED)),
            refusalFor(refusal, client, info),
            firstBytes,
            agent,
          ),
        relay: (stream) => relayStream(client, stream, agent, target),
      });
    },
  };
  return handler;
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
 * taken now to go with the stream's OPEN (OpenStreamOptions.firstBytes). Undefined when nothing is
 * buffered (a terminated client whose TLS has not delivered a record yet).
 */
function takeBuffered(client: Duplex): Buffer | undefined {
  if (client.readableLength === 0) return undefined;
  const bytes = client.read() as Buffer | null;
  return bytes ?? undefined;
}

/** The client and its tunnel stream, both ways; a stream that ends badly fails the client with why. */
function relayStream(client: Duplex, stream: TunnelStream, agent: string, target: string): void {
  // Registered before splice's own 'close' listener, so the client is destroyed with the reason
  // (and the multiplexer logs it) rather than silently by splice.
  const why = failureReason(stream);
  // A reset that came in the same read as the answer closed the stream before this relay began
  // (the answer resolves the open a microtask later): there is nothing to relay, and no 'close' to
  // wait for.
  if (stream.closed) return failClient(client, streamFailure(why(), agent, target));
  stream.once('close', () => {
    if (closedCleanly(stream) || client.destroyed) return;
    failClient(client, streamFailure(why(), agent, target));
  });
  // A client that leaves early releases its stream with a FIN, never a reset. Both ways
  // coalesced: the stream's many small chunks per read, and no pause per client read.
  // A client whose FIN came with its first bytes ended when takeBuffered emptied it: splice
  // passes that FIN on at once.
  splice(client, tunnelDuplex(stream), () => {}, undefined, {
    releaseB: () => releaseFramedStream(stream),
    coalesceA: true,
    coalesceB: true,
  });
  client.resume();
}

/** A tunnel stream that closed badly, as the client's error. */
function streamFailure(why: string, agent: string, target: string): GateError {
  return new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${target} via agent ${agent}: ${why}`);
}

/** Bytes a bare client may send while its stream opens before it is no longer read. */
const EARLY_BYTES_LIMIT = 64 * 1024;

/**
 * A passthrough client on its bare handle, carried by a tunnel stream: a part of the connection
 * while the stream opens (destroying it abandons the open), then a FramedRelay between the
 * handle and the stream, with the same guarantees and codes as the socket path above: a client
 * that leaves releases its stream with a FIN, a stream that fails fails the client with
 * GATE_ERR_AGENT_STREAM_FAILED, a client reset is GATE_ERR_CLIENT_RESET.
 */
class BareTunnelClient implements ClientReader {
  private readonly cancel = new DialCancel();
  private settled = false;
  /** What the client sent while the stream opened, and whether its FIN came too. */
  private early: Buffer[] | undefined = undefined;
  private earlyBytes = 0;
  private ended = false;

  constructor(
    private readonly client: HandleEnd,
    private readonly conn: ConnectionParts,
    private readonly agent: string,
    private readonly target: string,
    private readonly watch: WatchRelay | undefined,
    private readonly refusal: RefusalChoice,
    private readonly explain: (error: GateError) => GateError,
  ) {}

  open(openFor: StreamOpen, rest: Buffer): void {
    this.conn.attach(this);
    // The client is read while its stream opens, as the socket path's held client is: a client
    // that resets then fails its connection at once (GATE_ERR_CLIENT_RESET) and cancels the open.
    this.client.read(this);
    openFor(this.conn.info.remote, this.cancel, rest.length > 0 ? rest : undefined).then(
      (stream) => this.relay(stream),
      (err: unknown) => {
        if (this.settle()) this.fail(this.explain(toGateError(err, ErrorCodes.AGENT_STREAM_FAILED)), rest);
      },
    );
  }

  /**
   * The stream could not be opened: the connection fails with `error`, its client told why first
   * when its protocol is known (only now is the handle made a socket, on this failure path).
   */
  private fail(error: GateError, rest: Buffer): void {
    const { conn, client } = this;
    const protocol = refusalFor(this.refusal, undefined, conn.info);
    if (!protocol) return conn.fail(error);
    conn.recordError(error);
    client.stopReading();
    const { early } = this;
    const socket = client.toSocket(Buffer.alloc(0));
    conn.handOver(socket, socket);
    if (this.ended) socket.push(null);
    refuseClient(socket, error, protocol, early ? Buffer.concat([rest, ...early]) : rest, this.agent);
  }

  data(chunk: Buffer): void {
    (this.early ??= []).push(chunk);
    this.earlyBytes += chunk.length;
    // Bounded: past this the client waits unread (backpressure) until the relay starts.
    if (this.earlyBytes >= EARLY_BYTES_LIMIT) this.client.stopReading();
  }

  end(): void {
    this.ended = true;
  }

  /** The connection ends while the stream opens: the open is abandoned (nothing is relayed). */
  destroy(): void {
    if (!this.settle()) return;
    this.cancel.cancel('client closed');
  }

  /** True the first time: the open's outcome, or its abandonment. Either way no longer a part. */
  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.conn.closed(this);
    return true;
  }

  private relay(stream: TunnelStream): void {
    if (!this.settle()) return releaseTunnelStream(stream);
    const { conn, agent, target } = this;
    const why = failureReason(stream);
    const onClose = (failure: FramedRelayFailure | undefined): void => {
      if (failure?.side === 'stream') conn.recordError(streamFailure(why(), agent, target));
      else if (failure) conn.recordError(errnoError(failure.code), 'client');
      conn.closed(relay);
    };
    const relay = new FramedRelay(this.client.take(), stream, { release: releaseFramedStream, onClose });
    conn.handOver(relay, relay);
    this.watch?.(relay, conn);
    const { early } = this;
    relay.start(early && (early.length === 1 ? early[0] : Buffer.concat(early)), this.ended);
  }
}
